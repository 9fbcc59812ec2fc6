// SPDX-License-Identifier: MIT
//
// cdiresolve: CDI device names resolved the way a container runtime
// resolves them, with the CDI project's own Go library (Debian's
// golang-github-container-orchestrated-devices-container-device-interface-dev,
// 0.5.2: the version of Debian 12's podman and of runtimes of its age).
// For tests/integration/test_kubelet.py: what an Allocate answer's CDI
// names become in a container.
//
//	cdiresolve SPEC-DIR NAME...
//
// It reads SPEC-DIR as a runtime's cache does, injects NAME... into an
// empty OCI runtime spec and prints one JSON document: the spec files'
// errors, the names it could not resolve, and the container's
// environment, device nodes and mounts after injection.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi"
	oci "github.com/opencontainers/runtime-spec/specs-go"
)

type node struct {
	Path  string `json:"path"`
	Type  string `json:"type"`
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
}

type mount struct {
	Source      string   `json:"source"`
	Destination string   `json:"destination"`
	Options     []string `json:"options"`
}

type report struct {
	SpecErrors map[string][]string `json:"spec_errors"`
	Devices    []string            `json:"cdi_devices"`
	Unresolved []string            `json:"unresolved"`
	Error      string              `json:"error,omitempty"`
	Env        []string            `json:"env"`
	Nodes      []node              `json:"device_nodes"`
	Mounts     []mount             `json:"mounts"`
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: cdiresolve SPEC-DIR NAME...")
		os.Exit(2)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(os.Args[1]),
		cdi.WithAutoRefresh(false))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdiresolve: %v\n", err)
		os.Exit(1)
	}
	r := report{SpecErrors: map[string][]string{}, Unresolved: []string{},
		Env: []string{}, Nodes: []node{}, Mounts: []mount{}}
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			r.SpecErrors[path] = append(r.SpecErrors[path], e.Error())
		}
	}
	r.Devices = cache.ListDevices()
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	unresolved, err := cache.InjectDevices(spec, os.Args[2:]...)
	if unresolved != nil {
		r.Unresolved = unresolved
	}
	if err != nil {
		r.Error = err.Error()
	}
	r.Env = append(r.Env, spec.Process.Env...)
	for _, d := range spec.Linux.Devices {
		r.Nodes = append(r.Nodes, node{d.Path, d.Type, d.Major, d.Minor})
	}
	for _, m := range spec.Mounts {
		r.Mounts = append(r.Mounts, mount{m.Source, m.Destination, m.Options})
	}
	out, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdiresolve: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
