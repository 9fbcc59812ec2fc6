// SPDX-License-Identifier: MIT
//
// goclient: a device plugin's endpoint seen through grpc-go, the wire
// stack the kubelet has (Debian's golang-google-grpc-dev), for
// tests/kubelet/test_plugin.py and tests/integration/test_kubelet.py.
// The messages and the client stub are generated at build time from
// tests/kubelet/api.proto (make helpers: build/tests/kubelet/goclient).
//
// It dials as the kubelet's device manager does (plugin/v1beta1
// client.go: a blocking dial of at most 10 s, authority "localhost", a
// unix socket dialler), then calls GetDevicePluginOptions,
// ListAndWatch (its first list) and, given device IDs, one Allocate
// of one container; it prints what it got as one JSON document:
//
//	goclient ENDPOINT [DEVICE-ID...]
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

type device struct {
	ID     string `json:"ID"`
	Health string `json:"health"`
	NUMA   *int64 `json:"numa"`
}

type mount struct {
	Host     string `json:"host_path"`
	Cont     string `json:"container_path"`
	ReadOnly bool   `json:"read_only"`
}

type node struct {
	Host  string `json:"host_path"`
	Cont  string `json:"container_path"`
	Perms string `json:"permissions"`
}

type allocation struct {
	CDI         []string          `json:"cdi_devices"`
	Envs        map[string]string `json:"envs"`
	Mounts      []mount           `json:"mounts"`
	Devices     []node            `json:"devices"`
	Annotations map[string]string `json:"annotations"`
}

type callError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type report struct {
	Options  map[string]bool `json:"options"`
	Devices  []device        `json:"devices"`
	Allocate *allocation     `json:"allocate,omitempty"`
	AllocErr *callError      `json:"allocate_error,omitempty"`
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "goclient: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: goclient ENDPOINT [DEVICE-ID...]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, os.Args[1],
		grpc.WithAuthority("localhost"), grpc.WithInsecure(),
		grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		fail("dial %s: %v", os.Args[1], err)
	}
	defer conn.Close()
	c := NewDevicePluginClient(conn)
	var r report

	opts, err := c.GetDevicePluginOptions(context.Background(), &Empty{})
	if err != nil {
		fail("GetDevicePluginOptions: %v", err)
	}
	r.Options = map[string]bool{
		"pre_start_required":                 opts.PreStartRequired,
		"get_preferred_allocation_available": opts.GetPreferredAllocationAvailable,
	}

	lctx, lcancel := context.WithCancel(context.Background())
	stream, err := c.ListAndWatch(lctx, &Empty{})
	if err != nil {
		fail("ListAndWatch: %v", err)
	}
	first, err := stream.Recv()
	if err != nil {
		fail("ListAndWatch: %v", err)
	}
	lcancel()
	r.Devices = []device{}
	for _, d := range first.Devices {
		dev := device{ID: d.ID, Health: d.Health}
		if d.Topology != nil && len(d.Topology.Nodes) > 0 {
			n := d.Topology.Nodes[0].ID
			dev.NUMA = &n
		}
		r.Devices = append(r.Devices, dev)
	}

	if len(os.Args) > 2 {
		actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer acancel()
		resp, err := c.Allocate(actx, &AllocateRequest{
			ContainerRequests: []*ContainerAllocateRequest{
				{DevicesIds: os.Args[2:]}}})
		if err != nil {
			st := status.Convert(err)
			r.AllocErr = &callError{st.Code().String(), st.Message()}
		} else if len(resp.ContainerResponses) != 1 {
			fail("Allocate: %d container responses for 1",
				len(resp.ContainerResponses))
		} else {
			cr := resp.ContainerResponses[0]
			a := allocation{CDI: []string{}, Envs: cr.Envs,
				Mounts: []mount{}, Devices: []node{},
				Annotations: cr.Annotations}
			for _, d := range cr.CdiDevices {
				a.CDI = append(a.CDI, d.Name)
			}
			for _, m := range cr.Mounts {
				a.Mounts = append(a.Mounts, mount{m.HostPath, m.ContainerPath, m.ReadOnly})
			}
			for _, d := range cr.Devices {
				a.Devices = append(a.Devices, node{d.HostPath, d.ContainerPath, d.Permissions})
			}
			r.Allocate = &a
		}
	}
	out, err := json.Marshal(r)
	if err != nil {
		fail("%v", err)
	}
	fmt.Println(string(out))
}
