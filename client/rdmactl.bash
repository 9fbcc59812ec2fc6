# bash completion for rdmactl(1)                           -*- shell-script -*-
# SPDX-License-Identifier: MIT
#
# Commands and options as rdmactl --help lists them; profile and object
# names from the daemon itself (rdmactl --json), when it answers within
# two seconds, through the same --socket as the command line.
#
# COMPREPLY=($(compgen ...)) splits on purpose: the words have no spaces.
# shellcheck disable=SC2207

# _rdmactl_query ARGS...: the daemon's JSON document, or nothing.
_rdmactl_query()
{
	local -a argv=("${_rdmactl_cmd[@]}" --json "$@")

	if type -P timeout >/dev/null; then
		timeout 2 "${argv[@]}" 2>/dev/null
	else
		"${argv[@]}" 2>/dev/null
	fi
}

# The names of the daemon's profiles.
_rdmactl_profiles()
{
	# rdmactl --json indents by two: a profile's own keys are at four.
	_rdmactl_query profiles |
		sed -n 's/^    "name": "\([^"\\]*\)",\{0,1\}$/\1/p'
}

# _rdmactl_objects PROFILE KIND: the names of PROFILE's objects of KIND.
_rdmactl_objects()
{
	_rdmactl_query show "$1" | awk -v kind="$2" '
		/^      "kind": / { k = $2; gsub(/[",]/, "", k) }
		/^      "name": / { n = $2; gsub(/[",]/, "", n)
				    if (k == kind) print n }'
}

_rdmactl_devices()
{
	local d

	for d in /sys/class/infiniband/*; do
		[[ -e $d ]] && printf '%s\n' "${d##*/}"
	done
}

_rdmactl()
{
	local cur prev words cword
	_init_completion || return

	local commands="devices device port gids profiles show health version
		config sessions reload qp endpoint selftest monitor target"
	local options="--socket --json --help --version"
	local kinds="memory xrcd pd dm mr mw cq srq qp ah target mcast"
	local -a _rdmactl_cmd=("${words[0]}") args=()
	local i cmd=""

	# The command, its arguments so far, and the connection options to
	# ask the same daemon with.
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-s | --socket)
			_rdmactl_cmd+=("${words[i]}" "${words[i + 1]}")
			((i++))
			;;
		--state | --endpoint)
			((i++))
			;;
		--socket=*)
			_rdmactl_cmd+=("${words[i]}")
			;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then
				cmd=${words[i]}
			else
				args+=("${words[i]}")
			fi
			;;
		esac
	done

	case $prev in
	-s | --socket | --endpoint)
		_filedir
		return
		;;
	--state)
		COMPREPLY=($(compgen -W "reset init rtr rts error" -- "$cur"))
		return
		;;
	esac

	if [[ $cur == -* ]]; then
		case $cmd in
		qp) options+=" --state --endpoint" ;;
		reload) options+=" --force" ;;
		esac
		COMPREPLY=($(compgen -W "$options" -- "$cur"))
		return
	fi

	local n=${#args[@]} words_list=""
	case $cmd in
	"")
		words_list=$commands
		;;
	device)
		case $n in
		0) words_list=show ;;
		1) words_list=$(_rdmactl_devices) ;;
		esac
		;;
	port | gids)
		[[ $n -eq 0 ]] && words_list=$(_rdmactl_devices)
		;;
	show)
		case $n in
		0) words_list=$(_rdmactl_profiles) ;;
		1) words_list=$kinds ;;
		2) words_list=$(_rdmactl_objects "${args[0]}" "${args[1]}") ;;
		esac
		;;
	qp)
		case $n in
		0) words_list=$(_rdmactl_profiles) ;;
		1) words_list=$(_rdmactl_objects "${args[0]}" qp) ;;
		*)
			# The path keys of rdmad.conf(5).
			COMPREPLY=($(compgen -W "dgid= port_num= pkey_index=
				qkey= dqpn= rq_psn= sq_psn= mtu=
				max_dest_rd_atomic= min_rnr_timer= dlid= sl=
				src_path_bits= static_rate= sgid_index=
				hop_limit= traffic_class= flow_label= timeout=
				retry_cnt= rnr_retry= max_rd_atomic=" -- "$cur"))
			compopt -o nospace
			return
			;;
		esac
		;;
	monitor)
		words_list="profile_state object_state progress reload
			device_added device_removed port_active port_error
			gid_change qp_ cq_error srq_limit_reached session_attach
			session_detach target_ mcast_"
		;;
	target)
		case $n in
		0) words_list="list revoke" ;;
		1) words_list=$(_rdmactl_profiles) ;;
		2) words_list=$(_rdmactl_objects "${args[1]}" target) ;;
		esac
		;;
	endpoint)
		case $n in
		0) words_list=$(_rdmactl_profiles) ;;
		1) words_list=$(_rdmactl_objects "${args[0]}" qp) ;;
		esac
		;;
	selftest)
		case $n in
		0) words_list=$(_rdmactl_profiles) ;;
		1 | 2) words_list=$(_rdmactl_objects "${args[0]}" qp) ;;
		3) words_list=$(_rdmactl_objects "${args[0]}" mr) ;;
		esac
		;;
	esac
	COMPREPLY=($(compgen -W "$words_list" -- "$cur"))
} &&
	complete -F _rdmactl rdmactl

# ex: filetype=sh
