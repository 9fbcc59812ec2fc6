// SPDX-License-Identifier: MIT
/* Table-driven tests of the configuration parser: good inputs give the
 * expected tree, bad inputs the expected file:line and message. Runs
 * under ASan/LSan, so every path is also checked for leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "config.h"
#include "validate.h"

#define HEAD                                                                   \
	"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"
/* HEAD is line 1; the profile starts on line 2. */
#define PROFILE(body) HEAD "profiles = ( { name = \"p\"; device = \"d\";\n" body "\n} );\n"

#define TARGET_BASE "memory = ( { name = \"m\"; size = \"1M\"; } );\npd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; access = [ \"local_write\", \"mw_bind\" ]; } );\ncq = ( { name = \"c\"; } );\n"

struct bad_case {
	const char *name;
	const char *text;
	int line;
	const char *msg;
};

static const struct bad_case bad_cases[] = {
	{ "syntax: missing value", HEAD "profiles = ( { name = ; } );", 2, "syntax error" },
	{ "syntax: unterminated group", HEAD "daemon = {\n", 3, "syntax error" },
	{ "unknown top-level key", HEAD "\nfoo = 1;", 3, "unknown top-level key 'foo'" },
	{ "unknown daemon key", "daemon = { colour = 1; };", 1, "unknown key 'colour' in daemon" },
	{ "unknown http key", "daemon = { http = { port = 1; }; };", 1, "unknown key 'port' in http" },
	{ "unknown device key", "devices = ( { name = \"d\"; match = { ibdev = \"x\"; }; speed = 1; } );", 1, "unknown key 'speed' in device" },
	{ "unknown match key", "devices = ( { name = \"d\"; match = { vendor = \"x\"; }; } );", 1, "unknown key 'vendor' in match" },
	{ "device without name", "devices = ( { match = { ibdev = \"x\"; }; } );", 1, "device: missing required key 'name'" },
	{ "port out of range", "devices = ( { name = \"d\"; match = { ibdev = \"x\"; }; port = 0; } );", 1, "'port' = 0 is out of range [1, 255]" },
	{ "port wrong type", "devices = ( { name = \"d\"; match = { ibdev = \"x\"; }; port = \"1\"; } );", 1, "'port' must be an integer, not a string" },
	{ "devices not a list", "devices = { name = \"d\"; };", 1, "must be a list of groups" },
	{ "unknown profile key", PROFILE("colour = 1;"), 3, "unknown key 'colour' in profile" },
	{ "unknown pd key", PROFILE("pd = ( { name = \"a\"; colour = \"red\"; } );"), 3, "unknown key 'colour' in pd" },
	{ "profile without device", HEAD "profiles = ( { name = \"p\"; } );", 2, "profile: missing required key 'device'" },
	{ "dangling device", HEAD "profiles = ( { name = \"p\"; device = \"nope\"; } );", 2, "device 'nope' is not declared" },
	{ "dangling mr pd", PROFILE("memory = ( { name = \"m\"; size = \"1M\"; } );\nmr = ( { name = \"r\"; pd = \"x\"; memory = \"m\"; } );"), 4, "mr 'r': pd 'x' is not declared in profile 'p'" },
	{ "dangling mr memory", PROFILE("pd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; } );"), 4, "mr 'r': memory 'm' is not declared" },
	{ "mr without memory or dm", PROFILE("pd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; } );"), 4, "mr 'r': give memory (host memory) or dm (device memory); or odp = true alone, for an implicit mr over a whole address space" },
	{ "implicit mr with a length", PROFILE("pd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; odp = true; length = \"4K\"; } );"), 4, "mr 'r': an implicit mr (odp without memory) covers a whole address space: no offset, length or zero_based" },
	{ "target exposing an implicit mr", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nmr = ( { name = \"all\"; pd = \"a\"; odp = true; access = [ \"local_write\", \"remote_read\", \"mw_bind\" ]; } );\ntarget = ( { name = \"t\"; listen = \"127.0.0.1:7000\"; pd = \"a\"; cq = \"c\"; allow = [ \"127.0.0.1\" ];\n  expose = ( { mr = \"all\"; access = [ \"remote_read\" ]; } ); } );"), 7, "target 't': mr 'all' is implicit (the daemon's whole address space): it cannot be exposed" },
	{ "mr with memory and dm", PROFILE("memory = ( { name = \"m\"; size = \"1M\"; } );\npd = ( { name = \"a\"; } );\ndm = ( { name = \"d\"; size = \"64K\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; dm = \"d\"; } );"), 6, "mr 'r': give memory (host memory) or dm (device memory), not both" },
	{ "dangling mr dm", PROFILE("pd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; dm = \"d\"; } );"), 4, "mr 'r': dm 'd' is not declared" },
	{ "dm mr outside its dm", PROFILE("pd = ( { name = \"a\"; } );\ndm = ( { name = \"d\"; size = \"64K\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; dm = \"d\"; offset = \"60K\"; length = \"8K\"; } );"), 5, "mr 'r': offset 61440 + length 8192 is outside dm 'd' (65536 bytes)" },
	{ "dm mr with odp", PROFILE("pd = ( { name = \"a\"; } );\ndm = ( { name = \"d\"; size = \"64K\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; dm = \"d\"; odp = true; } );"), 5, "mr 'r': odp is for host memory, not device memory" },
	{ "dangling qp cq", PROFILE("pd = ( { name = \"a\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; } );"), 4, "qp 'q': send_cq 'c' is not declared" },
	{ "duplicate pd", PROFILE("pd = ( { name = \"a\"; },\n { name = \"a\"; } );"), 4, "duplicate pd 'a'" },
	{ "duplicate profile", HEAD "profiles = ( { name = \"p\"; device = \"d\"; },\n { name = \"p\"; device = \"d\"; } );", 3, "duplicate profile 'p'" },
	{ "invalid name", PROFILE("pd = ( { name = \"a/b\"; } );"), 3, "pd name 'a/b' is invalid" },
	{ "bad size suffix", PROFILE("memory = ( { name = \"m\"; size = \"12Q\"; } );"), 3, "'size' = \"12Q\" is not a size" },
	{ "negative size", PROFILE("memory = ( { name = \"m\"; size = -5; } );"), 3, "a size cannot be negative" },
	{ "zero size", PROFILE("memory = ( { name = \"m\"; size = 0; } );"), 3, "'size' must be at least 1" },
	{ "size overflow", PROFILE("memory = ( { name = \"m\"; size = \"99999999999T\"; } );"), 3, "is not a size" },
	{ "size too large", PROFILE("memory = ( { name = \"m\"; size = \"2000T\"; } );"), 3, "memory 'm': size 2199023255552000 is larger than 1024T" },
	/* Issue 9: every integer is checked for truncation, every size
	 * bounded, every path against what will use it. */
	{ "uid cut in an array", PROFILE("allow = { uids = [ 1000,\n 4294968296 ]; };"), 4, "profile 'p': 'uids' = 4294968296 does not fit in 32 bits, which libconfig keeps without a suffix: write 4294968296L, and every integer of the array with an L" },
	{ "uid out of range", PROFILE("allow = { uids = [ 1000L, 4294967296L ]; };"), 3, "'uids' = 4294967296 is out of range [0, 4294967294]" },
	{ "hex cut to -1", PROFILE("qp = ( { name = \"q\"; type = \"ud\"; qkey = 0xFFFFFFFF; } );"), 3, "'qkey' = 0xFFFFFFFF does not fit in 32 bits" },
	{ "negative cut", PROFILE("cq = ( { name = \"c\"; comp_vector = -2147483649; } );"), 3, "'comp_vector' = -2147483649 does not fit in 32 bits" },
	{ "64-bit saturated", PROFILE("memory = ( { name = \"m\"; size = 99999999999999999999L; } );"), 3, "memory 'm': 'size' = 99999999999999999999L does not fit in 64 bits" },
	{ "dm size saturated", PROFILE("dm = ( { name = \"x\"; size = \"18446744073709551615\"; } );"), 3, "dm 'x': size 18446744073709551615 is larger than 1024T" },
	{ "mr offset too large", PROFILE("mr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; offset = 9223372036854775807L; } );"), 3, "mr 'r': offset 9223372036854775807 is larger than 1024T" },
	{ "control socket too long", "daemon = { control_socket = \"/run/rdmad/0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\"; };", 1, "is too long for a unix socket path (at most 107 bytes)" },
	{ "http socket too long", "daemon = {\n http = { listen = [ \"unix:/run/rdmad/0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\" ]; }; };", 2, "is too long for a unix socket path" },
	{ "runtime dir too long", "daemon = { runtime_dir = \"/run/0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123\"; };", 1, "its control socket rdmad.sock would not fit" },
	{ "relative control socket", "daemon = { control_socket = \"rdmad.sock\"; };", 1, "is not an absolute unix socket path" },
	{ "relative token file", "daemon = { http = { token_file = \"token\"; }; };", 1, "'token_file' = 'token' is not an absolute path" },
	{ "same key twice on a line", PROFILE("memory = ( { name = \"a\"; size = 5368709120; }, { name = \"b\"; size = 1073741824; } );"), 3, "memory 'a': 'size' = 5368709120 does not fit in 32 bits" },
	{ "line break before =", PROFILE("cq = ( { name = \"c\"; cqe\n= 4294967297; } );"), 3, "cq 'c': 'cqe' = 4294967297 does not fit in 32 bits" },
	{ "@include", HEAD "\n  @include \"/etc/passwd\"\n", 3, "@include is not supported" },
	{ "string not UTF-8", HEAD "profiles = ( { name = \"p\xff\"; device = \"d\"; } );", 2, "'name' is not valid UTF-8" },
	{ "qp peer without a name", PROFILE("qp = ( { type = \"rc\"; state = \"rts\"; peer = \"b\"; },\n { name = \"b\"; type = \"rc\"; state = \"rts\"; peer = \"a\"; } );"), 4, "qp 'b': peer 'a' is not declared in profile 'p'" },
	/* Targets (line 7 is the target's). */
	{ "target without expose", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; allow = [ \"10.0.0.0/8\" ]; } );"), 7, "target: missing required key 'expose'" },
	{ "target expose not a list", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; expose = { mr = \"r\"; }; } );"), 7, "'expose' must be a list of groups" },
	{ "target nine ranges", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; expose = ( {mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];},{mr=\"r\";access=[\"remote_read\"];} ); } );"), 7, "'expose' has 9 entries, at most 8" },
	{ "target unknown expose key", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\";\n expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; colour = 1; } ); } );"), 8, "unknown key 'colour' in expose" },
	{ "target expose dangling mr", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\";\n expose = ( { mr = \"nope\"; access = [ \"remote_read\" ]; } ); } );"), 8, "target 't': expose mr 'nope' is not declared in profile 'p'" },
	{ "target local access", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; expose = ( { mr = \"r\"; access = [ \"local_write\" ]; } ); } );"), 7, "\"local_write\" is not one of: remote_read, remote_write, remote_atomic" },
	{ "target listen not numeric", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"host:1\"; pd = \"a\"; cq = \"c\"; expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );"), 7, "'listen' = 'host:1' is not IPV4:PORT or [IPV6]:PORT" },
	{ "target wildcard", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"0.0.0.0:7471\"; pd = \"a\"; cq = \"c\"; expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );"), 7, "listen 0.0.0.0:7471 is a wildcard" },
	{ "target bad prefix", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; allow = [ \"10.0.0.0/33\" ]; expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );"), 7, "'10.0.0.0/33' is not an address or a prefix" },
	{ "target token too long", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; token = \"0123456789012345678901234567890123456789012345678901234567\"; expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );"), 7, "must be 1 to 56 bytes" },
	{ "target range outside the mr", PROFILE(TARGET_BASE "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\";\n expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; offset = \"1M\"; } ); } );"), 8, "target 't': offset 1048576 + length 0 is outside mr 'r' (1048576 bytes)" },
	{ "target cq used by a qp", PROFILE(TARGET_BASE "qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; } );\ntarget = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );"), 7, "qp 'q': cq 'c' is target 't''s" },
	{ "size wrong type", PROFILE("memory = ( { name = \"m\"; size = true; } );"), 3, "must be a size" },
	{ "bad backing", PROFILE("memory = ( { name = \"m\"; size = 1; backing = \"tape\"; } );"), 3, "'backing' = \"tape\" is not one of: memfd, hugetlb, file, anonymous" },
	{ "file without path", PROFILE("memory = ( { name = \"m\"; size = 1; backing = \"file\"; } );"), 3, "backing \"file\" needs a path" },
	{ "relative path", PROFILE("memory = ( { name = \"m\"; size = 1; backing = \"file\"; path = \"x\"; } );"), 3, "memory 'm': 'path' = 'x' is not an absolute path" },
	{ "page_size without hugetlb", PROFILE("memory = ( { name = \"m\"; size = \"2M\"; page_size = \"2M\"; } );"), 3, "memory 'm': page_size is only for backing \"hugetlb\"" },
	{ "page_size not a power of two", PROFILE("memory = ( { name = \"m\"; size = \"6M\"; backing = \"hugetlb\"; page_size = \"3M\"; } );"), 3, "memory 'm': page_size 3145728 is not a huge page size" },
	{ "page_size too small", PROFILE("memory = ( { name = \"m\"; size = \"4K\"; backing = \"hugetlb\"; page_size = \"4K\"; } );"), 3, "is not a huge page size (a power of two from 64K to 16G" },
	{ "size not a multiple of page_size", PROFILE("memory = ( { name = \"m\"; size = \"3M\"; backing = \"hugetlb\"; page_size = \"2M\"; } );"), 3, "memory 'm': size 3145728 is not a multiple of its page_size 2097152" },
	{ "mr outside memory", PROFILE("memory = ( { name = \"m\"; size = \"1M\"; } );\npd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; offset = \"1M\"; } );"), 5, "is outside memory 'm'" },
	{ "mr length too long", PROFILE("memory = ( { name = \"m\"; size = \"1M\"; } );\npd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; offset = \"4K\"; length = \"1M\"; } );"), 5, "is outside memory 'm'" },
	{ "bad access flag", PROFILE("memory = ( { name = \"m\"; size = 1; } );\npd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; access = [ \"remote_fly\" ]; } );"), 5, "\"remote_fly\" is not one of" },
	{ "remote write without local", PROFILE("memory = ( { name = \"m\"; size = 1; } );\npd = ( { name = \"a\"; } );\nmr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; access = [ \"remote_write\" ]; } );"), 5, "need local_write" },
	{ "bad qp type", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rd\"; send_cq = \"c\"; recv_cq = \"c\"; } );"), 3, "'type' = \"rd\" is not one of: rc, uc, ud" },
	{ "bad qp state", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"sqd\"; } );"), 3, "'state' = \"sqd\" is not one of: reset, init, rtr, rts" },
	{ "qp cap out of range", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; cap = { max_send_wr = -1; }; } );"), 3, "'max_send_wr' = -1 is out of range" },
	{ "unknown cap", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; cap = { max_wr = 1; }; } );"), 3, "unknown key 'max_wr' in cap" },
	{ "ud with remote access", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"ud\"; send_cq = \"c\"; recv_cq = \"c\"; access = [ \"remote_read\" ]; } );"), 5, "a UD QP takes no remote access flags" },
	{ "cqe out of range", PROFILE("cq = ( { name = \"c\"; cqe = 0; } );"), 3, "'cqe' = 0 is out of range" },
	{ "channel not bool", PROFILE("cq = ( { name = \"c\"; channel = 1; } );"), 3, "'channel' must be a boolean" },
	{ "match without any matcher", "devices = ( { name = \"d\"; match = { }; } );", 1, "match needs at least one of ibdev, guid, netdev, pci, driver" },
	{ "gid index and type", "devices = ( { name = \"d\"; match = { ibdev = \"x\"; }; gid = { index = 1; type = \"roce_v2\"; }; } );", 1, "gid takes index, or type and family, not both" },
	{ "bad gid type", "devices = ( { name = \"d\"; match = { ibdev = \"x\"; }; gid = { type = \"roce_v3\"; }; } );", 1, "'type' = \"roce_v3\" is not one of: ib, roce_v1, roce_v2" },
	{ "bad gid family", "devices = ( { name = \"d\"; match = { ibdev = \"x\"; }; gid = { family = \"ipx\"; }; } );", 1, "'family' = \"ipx\" is not one of: ipv4, ipv6" },
	{ "xrc srq without xrcd", PROFILE("pd = ( { name = \"a\"; } );\nsrq = ( { name = \"s\"; pd = \"a\"; type = \"xrc\"; } );"), 4, "srq 's': an XRC SRQ needs xrcd and cq" },
	{ "basic srq with cq", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nsrq = ( { name = \"s\"; pd = \"a\"; cq = \"c\"; } );"), 5, "xrcd and cq are for type \"xrc\" only" },
	{ "srq limit above max_wr", PROFILE("pd = ( { name = \"a\"; } );\nsrq = ( { name = \"s\"; pd = \"a\"; max_wr = 8; srq_limit = 9; } );"), 4, "srq_limit 9 is above max_wr 8" },
	{ "dangling srq", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; srq = \"s\"; } );"), 5, "qp 'q': srq 's' is not declared" },
	{ "qp on an xrc srq", PROFILE("xrcd = ( { name = \"x\"; } );\npd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nsrq = ( { name = \"s\"; pd = \"a\"; type = \"xrc\"; xrcd = \"x\"; cq = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; srq = \"s\"; } );"), 7, "srq 's' is an XRC SRQ" },
	{ "xrc_recv without xrcd", PROFILE("qp = ( { name = \"q\"; type = \"xrc_recv\"; } );"), 3, "xrcd is required for type \"xrc_recv\"" },
	{ "rc with xrcd", PROFILE("xrcd = ( { name = \"x\"; } );\npd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; xrcd = \"x\"; } );"), 6, "xrcd is not allowed for type \"rc\"" },
	{ "xrc_recv with cqs", PROFILE("xrcd = ( { name = \"x\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; type = \"xrc_recv\"; xrcd = \"x\"; send_cq = \"c\"; } );"), 5, "an xrc_recv QP takes no send_cq" },
	{ "xrc_send with recv_cq", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"xrc_send\"; send_cq = \"c\"; recv_cq = \"c\"; } );"), 5, "an xrc_send QP takes no recv_cq" },
	{ "rc without recv_cq", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; } );"), 5, "missing required key 'recv_cq'" },
	{ "rts without remote", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; } );"), 5, "state \"rts\" needs the remote end" },
	{ "recover from reset", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"reset\"; recover = \"reset\"; } );"), 5, "recover = \"reset\" brings a QP back to its state" },
	{ "bad recover", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; recover = \"retry\"; } );"), 5, "'recover' = \"retry\" is not one of: none, reset" },
	{ "alt_path on ud", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"ud\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; alt_path = { timeout = 3; }; } );"), 5, "alt_path is for a connected QP (rc, uc, xrc_send, xrc_recv) in state \"rts\"" },
	{ "alt_path key of the connection", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; path = { dqpn = 5; }; alt_path = { dqpn = 6; }; } );"), 5, "unknown key 'dqpn' in alt_path" },
	{ "pkey and pkey_index", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; pkey = 0xffff; pkey_index = 2; } );"), 5, "give pkey (its value) or pkey_index, not both" },
	{ "pkey out of range", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; pkey = 0x10000; } );"), 5, "'pkey' = 65536 is out of range" },
	{ "peer endpoint not json", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"{qp_num: 1}\"; } );"), 5, "qp 'q': peer: the endpoint document is not JSON" },
	{ "peer endpoint without qp_num", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"{\\\"psn\\\": 1}\"; } );"), 5, "qp 'q': peer: endpoint: 'qp_num' is missing" },
	{ "peer endpoint of another type", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"{\\\"qp_num\\\": 1, \\\"type\\\": \\\"uc\\\"}\"; } );"), 5, "qp 'q': peer: endpoint: the endpoint is of a uc QP, this one is rc" },
	{ "peer endpoint relative file", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"@ep.json\"; } );"), 5, "qp 'q': peer \"@ep.json\": the endpoint file must be an absolute path" },
	{ "peer endpoint missing file", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"@/nonexistent/ep.json\"; } );"), 5, "qp 'q': peer: cannot read /nonexistent/ep.json: No such file or directory" },
	{ "peer endpoint on ud", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"ud\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"{\\\"qp_num\\\": 1}\"; } );"), 5, "qp 'q': a peer's endpoint is for a connected QP (rc, uc, xrc_send, xrc_recv), not ud" },
	{ "peer and path", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"r\"; path = { dqpn = 5; }; },\n { name = \"r\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"q\"; } );"), 5, "give peer or path, not both" },
	{ "own peer", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"q\"; } );"), 5, "a QP cannot be its own peer" },
	{ "peer not mutual", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"r\"; },\n { name = \"r\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; path = { dqpn = 1; }; } );"), 5, "its peer 'r' must name 'q' as peer too" },
	{ "peer of another type", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"r\"; },\n { name = \"r\"; pd = \"a\"; type = \"uc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"q\"; } );"), 5, "must be of the same type, rc or uc" },
	{ "dangling peer", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rts\"; peer = \"zz\"; } );"), 5, "qp 'q': peer 'zz' is not declared" },
	{ "peer in state init", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; peer = \"q2\"; } );"), 5, "peer and path are for state \"rtr\" or \"rts\", not \"init\"" },
	{ "path mtu", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rtr\"; path = { dqpn = 1; mtu = 3000; }; } );"), 3, "path mtu 3000 is not one of 256, 512" },
	{ "path timeout", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rtr\"; path = { dqpn = 1; timeout = 40; }; } );"), 3, "qp 'q': 'timeout' = 40 is out of range [0, 31]" },
	{ "path unknown key", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rtr\"; path = { dqpn = 1; speed = 4; }; } );"), 3, "unknown key 'speed' in path" },
	{ "path bad dgid", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rtr\"; path = { dqpn = 1; dgid = \"::zz\"; }; } );"), 3, "'dgid' = '::zz' is not a GID" },
	{ "path dqpn over 24 bits", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; state = \"rtr\"; path = { dqpn = 16777216; }; } );"), 3, "'dqpn' = 16777216 is out of range" },
	{ "ah without dgid or dlid", PROFILE("pd = ( { name = \"a\"; } );\nah = ( { name = \"h\"; pd = \"a\"; } );"), 4, "ah 'h' has neither dgid nor dlid" },
	{ "ah static_rate", PROFILE("pd = ( { name = \"a\"; } );\nah = ( { name = \"h\"; pd = \"a\"; dlid = 3; static_rate = 64; } );"), 4, "static_rate" },
	{ "qp path static_rate", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; recv_cq = \"c\"; path = { static_rate = 64; }; } );"), 5, "static_rate" },
	{ "ah bad dgid", PROFILE("pd = ( { name = \"a\"; } );\nah = ( { name = \"h\"; pd = \"a\"; dgid = \"nowhere\"; } );"), 4, "ah 'h': 'dgid' = 'nowhere' is not a GID" },
	{ "mw type 3", PROFILE("pd = ( { name = \"a\"; } );\nmw = ( { name = \"w\"; pd = \"a\"; type = 3; } );"), 4, "mw 'w': 'type' = 3 is out of range [1, 2]" },
	{ "dangling mw pd", PROFILE("mw = ( { name = \"w\"; pd = \"a\"; } );"), 3, "mw 'w': pd 'a' is not declared" },
	{ "dm size zero", PROFILE("dm = ( { name = \"m\"; size = 0; } );"), 3, "dm 'm': 'size' must be at least 1" },
	{ "xrcd relative file", PROFILE("xrcd = ( { name = \"x\"; file = \"x.xrcd\"; } );"), 3, "'file' = 'x.xrcd' is not an absolute path" },
	{ "negative uid", PROFILE("allow = { uids = [ -1 ]; };"), 3, "'uids' = -1 is out of range" },
	{ "unknown control group", "daemon = { control_group = \"no-such-group-x\"; };", 1, "daemon: 'control_group' = 'no-such-group-x' is not a known group" },
	{ "unknown allow key", PROFILE("allow = { hosts = [ \"x\" ]; };"), 3, "unknown key 'hosts' in allow" },
	{ "bad listen", "daemon = { http = { listen = [ \"localhost\" ]; }; };", 1, "'localhost' is not IPV4:PORT" },
	{ "listen by host name", "daemon = {\n http = { listen = [ \"localhost:80\" ]; }; };", 2, "numeric addresses only" },
	{ "listen bad v6", "daemon = { http = { listen = [ \"[::zz]:80\" ]; }; };", 1, "'[::zz]:80' is not" },
	{ "listen bad port", "daemon = { http = { listen = [ \"127.0.0.1:0\" ]; }; };", 1, "'127.0.0.1:0' is not" },
	{ "listen relative unix", "daemon = { http = { listen = [ \"unix:x.sock\" ]; }; };", 1, "'unix:x.sock' is not an absolute unix socket path" },
	{ "same key twice on a line, one too big", PROFILE("cq = ( { name = \"a\"; cqe = 64; }, { name = \"b\"; cqe = 4294967424; } );"), 3, "cq 'b': 'cqe' = 4294967424 does not fit in 32 bits" },
	{ "int literal over 32 bits", PROFILE("memory = ( { name = \"m\"; size = 5368709120; } );"), 3, "memory 'm': 'size' = 5368709120 does not fit in 32 bits" },
	{ "hex literal over 31 bits", PROFILE("qp = ( { name = \"q\"; pd = \"a\"; type = \"ud\"; send_cq = \"c\"; recv_cq = \"c\"; qkey = 0x80000000; } );"), 3, "'qkey' = 0x80000000 does not fit in 32 bits" },
	{ "uc with remote read", PROFILE("pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\nqp = ( { name = \"q\"; pd = \"a\"; type = \"uc\"; send_cq = \"c\"; recv_cq = \"c\"; access = [ \"remote_read\" ]; } );"), 5, "a UC QP allows remote_write only" },
	{ "value error names its object", PROFILE("cq = ( { name = \"c7\"; cqe = -3; } );"), 3, "cq 'c7': 'cqe' = -3 is out of range" },
	{ "bad log level", "daemon = {\n log_level = \"loud\"; };", 2, "daemon: 'log_level' = 'loud' is not one of error" },
	{ "bad orphans policy", "daemon = {\n orphans = \"drop\"; };", 2, "daemon: 'orphans' = 'drop' is not \"keep\" or \"retire\"" },
	{ "too many workers", "daemon = {\n workers = 5000; };", 2, "daemon: 'workers' = 5000 is out of range [0, 1024]" },
	{ "negative workers", "daemon = {\n workers = -1; };", 2, "daemon: 'workers' = -1 is out of range [0, 1024]" },
	{ "listen not strings", "daemon = { http = { listen = [ 1 ]; }; };", 1, "must hold strings only" },
	{ "plain http off loopback", "daemon = {\n http = {\n listen = [ \"127.0.0.1:1\", \"0.0.0.0:80\" ]; }; };", 3, "'listen' = \"0.0.0.0:80\" is not a loopback address" },
	{ "reserved not below the cap", "daemon = {\n http = { max_connections = 8;\n reserved_connections = 8; }; };", 2, "'reserved_connections' = 8 is not less than 'max_connections' (8)" },
	{ "reserved over the default cap", "daemon = { http = { reserved_connections = 5000; }; };", 1, "is not less than 'max_connections' (4096)" },
	{ "reserved zero", "daemon = { http = { reserved_connections = 0; }; };", 1, "reserved_connections" },
	{ "host with a port", "daemon = { http = { hosts = [ \"rdmad.example:80\" ]; }; };", 1, "'rdmad.example:80' is not a host name" },
	{ "host with a scheme", "daemon = { http = { hosts = [ \"http://x\" ]; }; };", 1, "'http://x' is not a host name" },
	{ "host empty", "daemon = {\n http = {\n hosts = [ \"\" ]; }; };", 3, "is not a host name" },
	{ "host bad v6", "daemon = { http = { hosts = [ \"[::zz]\" ]; }; };", 1, "'[::zz]' is not a host name" },
	{ "tls cert without key", "daemon = {\n http = { tls_cert = \"/c.pem\"; }; };", 2, "'tls_cert' and 'tls_key' go together" },
	{ "tls cert relative", "daemon = { http = { tls_cert = \"c.pem\"; tls_key = \"/k\"; }; };", 1, "is not an absolute path" },
	{ "hello_timeout zero", "daemon = { hello_timeout = 0; };", 1, "out of range" },
	{ "cdi_spec relative", "daemon = {\n cdi_spec = \"cdi/rdmad.json\"; };", 2, "daemon: 'cdi_spec' = 'cdi/rdmad.json' is not an absolute path" },
	{ "cdi_spec not json", "daemon = {\n\n cdi_spec = \"/run/cdi/rdmad.yaml\"; };", 3, "must name a file ending in .json" },
	{ "cdi_spec a directory", "daemon = { cdi_spec = \"/run/cdi/\"; };", 1, "must name a file ending in .json" },
	{ "cdi_spec not a string", "daemon = {\n cdi_spec = false; };", 2, "cdi_spec" },
};

static void test_bad(void **state)
{
	const struct bad_case *c = *state;
	struct config *cfg = NULL;
	char want[64];
	int found = 0;

	assert_int_equal(config_load_string("t.conf", c->text, &cfg), 0);
	assert_non_null(cfg);
	snprintf(want, sizeof(want), "t.conf:%d", c->line);
	for (size_t i = 0; i < cfg->n_errors; i++) {
		char got[64];

		snprintf(got, sizeof(got), "%s:%d", cfg->errors[i].loc.file,
			 cfg->errors[i].loc.line);
		if (strstr(cfg->errors[i].msg, c->msg) && !strcmp(got, want))
			found = 1;
	}
	if (!found) {
		config_print_errors(cfg, stderr);
		fail_msg("%s: no error containing '%s'", c->name, c->msg);
	}
	config_free(cfg);
}

static const char good_text[] =
	"daemon = { http = { listen = [ \"127.0.0.1:9\", \"[::1]:10\", "
	"\"unix:/run/x.sock\" ]; hosts = [ \"rdmad.example\", "
	"\"[2001:db8::1]\" ]; }; log_level = \"debug\"; workers = 3; "
	"cdi_spec = \"\"; };\n"
	"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; port = 2; "
	"gid = { index = 1; }; } );\n"
	"profiles = ( { name = \"p\"; device = \"d\";\n"
	"  allow = { users = [ \"app\" ]; groups = [ \"rdma\", \"x\" ]; };\n"
	"  memory = ( { name = \"m\"; size = 5368709120L; backing = \"memfd\"; },\n"
	"             { name = \"h\"; size = 4096; backing = \"anonymous\"; } );\n"
	"  pd = ( { name = \"a\"; } );\n"
	"  mr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; offset = \"1M\";\n"
	"           access = [ \"local_write\", \"remote_read\" ]; "
	"zero_based = true; } );\n"
	"  cq = ( { name = \"c\"; cqe = 100; channel = true; }, "
	"{ name = \"c2\"; cqe = 200; } );\n"
	"  qp = ( { name = \"q\"; pd = \"a\"; type = \"ud\"; send_cq = \"c\"; "
	"recv_cq = \"c\"; cap = { max_send_wr = 7; }; } );\n"
	"} );\n";

static void test_good(void **state)
{
	struct config *cfg = NULL;
	struct conf_profile *p;

	(void)state;
	assert_int_equal(config_load_string("good.conf", good_text, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(cfg->daemon.n_listen, 3);
	assert_string_equal(cfg->daemon.listen[1], "[::1]:10");
	assert_string_equal(cfg->daemon.log_level, "debug");
	assert_int_equal(cfg->daemon.workers, 3);
	/* Not given: leftovers that cannot be reclaimed are kept. */
	assert_string_equal(cfg->daemon.orphans, "keep");
	assert_string_equal(cfg->daemon.cdi_spec, ""); /* off */
	assert_string_equal(cfg->daemon.runtime_dir, "/run/rdmad");
	/* Not given: an eighth of the connections kept for the token. */
	assert_int_equal(cfg->daemon.http_reserved, 4096 / 8);
	assert_int_equal(cfg->daemon.n_http_hosts, 2);
	assert_string_equal(cfg->daemon.http_hosts[1], "[2001:db8::1]");
	assert_int_equal(cfg->n_devices, 1);
	assert_int_equal(cfg->devices[0].port, 2);
	assert_int_equal(cfg->devices[0].gid_index, 1);
	assert_string_equal(cfg->devices[0].ibdev, "rxe0");
	assert_int_equal(cfg->n_profiles, 1);
	p = &cfg->profiles[0];
	assert_int_equal(p->n_allow_groups, 2);
	assert_string_equal(p->allow_users[0], "app");
	assert_int_equal(p->n_objs[OBJ_MEMORY], 2);
	assert_int_equal(CONF_OBJS(p, OBJ_MEMORY, memory)[0].size, 5ULL << 30);
	assert_int_equal(CONF_OBJS(p, OBJ_MEMORY, memory)[1].backing,
			 MEM_ANONYMOUS);
	assert_int_equal(CONF_OBJS(p, OBJ_MR, mr)[0].offset, 1 << 20);
	assert_int_equal(CONF_OBJS(p, OBJ_MR, mr)[0].access,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	assert_true(CONF_OBJS(p, OBJ_MR, mr)[0].zero_based);
	assert_int_equal(CONF_OBJS(p, OBJ_MR, mr)[0].loc.line, 8);
	assert_int_equal(CONF_OBJS(p, OBJ_CQ, cq)[0].cqe, 100);
	assert_true(CONF_OBJS(p, OBJ_CQ, cq)[0].channel);
	assert_int_equal(CONF_OBJS(p, OBJ_QP, qp)[0].type, QPK_UD);
	assert_int_equal(CONF_OBJS(p, OBJ_QP, qp)[0].cap.max_send_wr, 7);
	/* default */
	assert_int_equal(CONF_OBJS(p, OBJ_QP, qp)[0].cap.max_recv_wr, 16);
	assert_int_equal(CONF_OBJS(p, OBJ_QP, qp)[0].state, QPS_TARGET_INIT);
	config_free(cfg);
}

static void test_defaults(void **state)
{
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(config_load_string("e.conf", "", &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(cfg->daemon.n_listen, 1);
	assert_string_equal(cfg->daemon.listen[0], "127.0.0.1:8470");
	assert_string_equal(cfg->daemon.control_socket,
			    "/run/rdmad/rdmad.sock");
	assert_string_equal(cfg->daemon.cdi_spec, "/run/cdi/rdmad.json");
	config_free(cfg);
}

static void test_all_errors_reported(void **state)
{
	struct config *cfg = NULL;

	(void)state;
	/* Three independent problems: all three are reported. */
	assert_int_equal(
		config_load_string(
			"m.conf",
			PROFILE("pd = ( { name = \"a\"; x = 1; } );\n"
				"cq = ( { name = \"c\"; cqe = 0; } );\n"
				"memory = ( { name = \"m\"; size = \"1Z\"; } );"),
			&cfg),
		0);
	assert_int_equal(cfg->n_errors, 3);
	/* Reported in line order, whichever pass found them. */
	assert_int_equal(cfg->errors[0].loc.line, 3);
	assert_int_equal(cfg->errors[1].loc.line, 4);
	assert_int_equal(cfg->errors[2].loc.line, 5);
	config_free(cfg);
}

static void test_parse_size(void **state)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t v;
	} t[] = {
		{ "0", 0, 0 },		   { "4096", 0, 4096 },
		{ "1K", 0, 1024 },	   { "64M", 0, 64ULL << 20 },
		{ "3G", 0, 3ULL << 30 },   { "2T", 0, 2ULL << 40 },
		{ "", -EINVAL, 0 },	   { "K", -EINVAL, 0 },
		{ "1k", -EINVAL, 0 },	   { "1KB", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },	   { " 1", -EINVAL, 0 },
		{ "1 K", -EINVAL, 0 },	   { "99999999999T", -ERANGE, 0 },
		{ "99999999999999999999", -ERANGE, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t v = 0;
		int r = config_parse_size(t[i].s, &v);

		if (r != t[i].ret)
			fail_msg("'%s': got %d, want %d", t[i].s, r, t[i].ret);
		if (!r && v != t[i].v)
			fail_msg("'%s': got %llu", t[i].s,
				 (unsigned long long)v);
	}
}

/* A file past the 16 MiB limit is refused, not read into memory whole. */
static void test_file_too_large(void **state)
{
	char path[] = "/tmp/rdmad-big-XXXXXX";
	struct config *cfg = NULL;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 17 << 20), 0);
	close(fd);
	assert_int_equal(config_load(path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 1);
	assert_non_null(strstr(cfg->errors[0].msg, "File too large"));
	config_free(cfg);
	unlink(path);
}

static void test_missing_file(void **state)
{
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(config_load("/nonexistent/rdmad.conf", &cfg), 0);
	assert_int_equal(cfg->n_errors, 1);
	assert_int_equal(cfg->errors[0].loc.line, 0);
	assert_non_null(strstr(cfg->errors[0].msg, "No such file"));
	config_free(cfg);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A main file in a fresh directory (dir: mkdtemp's template, then its
 * name) whose daemon.include is inc, created empty; text is the main
 * file's. */
struct inc_tree {
	char dir[32], main_path[128], inc[128], text[512];
};

static void inc_tree_make(struct inc_tree *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/rdmad-test-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->main_path, sizeof(t->main_path), "%s/rdmad.conf",
		 t->dir);
	snprintf(t->inc, sizeof(t->inc), "%s/profiles.d", t->dir);
	assert_int_equal(mkdir(t->inc, 0700), 0);
	snprintf(t->text, sizeof(t->text),
		 "daemon = { include = \"%s\"; };\n" HEAD, t->inc);
	write_file(t->main_path, t->text);
}

/* daemon.include merges every *.conf of a directory, in name order; a
 * problem in an included file names that file. */
static void test_include(void **state)
{
	struct inc_tree t;
	char *main_path = t.main_path, *inc = t.inc, *dir = t.dir;
	char a[160], b[160], skip[160];
	struct config *cfg = NULL;

	(void)state;
	inc_tree_make(&t);
	snprintf(a, sizeof(a), "%s/10-a.conf", inc);
	snprintf(b, sizeof(b), "%s/20-b.conf", inc);
	snprintf(skip, sizeof(skip), "%s/notes.txt", inc);
	write_file(a, "profiles = ( { name = \"pa\"; device = \"d\"; } );\n");
	write_file(b, "\nprofiles = ( { name = \"pb\"; device = \"d\"; } );\n");
	write_file(skip, "this is not a config");

	assert_int_equal(config_load(main_path, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(cfg->n_profiles, 2);
	assert_string_equal(cfg->profiles[0].name, "pa");
	assert_string_equal(cfg->profiles[1].name, "pb");
	assert_string_equal(cfg->profiles[1].loc.file, b);
	assert_int_equal(cfg->profiles[1].loc.line, 2);
	config_free(cfg);

	/* A duplicate across files, and a daemon section where only
	 * devices and profiles belong. */
	write_file(b, "daemon = { };\nprofiles = ( { name = \"pa\"; "
		      "device = \"d\"; } );\n");
	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 2);
	assert_string_equal(cfg->errors[0].loc.file, b);
	assert_int_equal(cfg->errors[0].loc.line, 1);
	assert_non_null(strstr(cfg->errors[0].msg, "unknown top-level key 'daemon'"));
	assert_non_null(strstr(cfg->errors[1].msg, "duplicate profile 'pa'"));
	assert_non_null(strstr(cfg->errors[1].msg, a));
	config_free(cfg);

	unlink(a);
	unlink(b);
	unlink(skip);
	rmdir(inc);
	unlink(main_path);
	rmdir(dir);
}

/* The files a load read, as they were: unchanged, a reload may read them
 * again here (config_load_known); any change to a file or to the include
 * directory says otherwise, and a file that changed after the first
 * look stops that load before it is parsed. */
static void test_sources(void **state)
{
	struct inc_tree t;
	char *main_path = t.main_path, *inc = t.inc, *dir = t.dir;
	char a[160], b[160], c[160];
	struct timespec later[2] = { { 0, UTIME_OMIT }, { 1, 0 } };
	struct config *cfg = NULL, *again = NULL;

	(void)state;
	inc_tree_make(&t);
	snprintf(a, sizeof(a), "%s/10-a.conf", inc);
	snprintf(b, sizeof(b), "%s/20-b.conf", inc);
	snprintf(c, sizeof(c), "%s/30-c.conf", inc);
	write_file(a, "profiles = ( { name = \"pa\"; device = \"d\"; } );\n");
	write_file(b, "profiles = ( { name = \"pb\"; device = \"d\"; } );\n");

	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	/* main, the directory, its two files, in the order read */
	assert_int_equal(cfg->n_sources, 4);
	assert_string_equal(cfg->sources[0].path, main_path);
	assert_string_equal(cfg->sources[1].path, inc);
	assert_string_equal(cfg->sources[2].path, a);
	assert_string_equal(cfg->sources[3].path, b);
	assert_true(config_sources_unchanged(cfg));
	assert_int_equal(config_load_known(main_path, cfg, &again), 0);
	assert_int_equal(again->n_profiles, 2);
	assert_string_equal(again->profiles[1].name, "pb");
	assert_true(config_sources_unchanged(again));
	config_free(again);
	again = NULL;

	/* An include touched: it does not look the same, but its bytes
	 * are, and they are what counts when they are read. */
	assert_int_equal(utimensat(AT_FDCWD, b, later, 0), 0);
	assert_false(config_sources_unchanged(cfg));
	assert_int_equal(config_load_known(main_path, cfg, &again), 0);
	config_free(again);
	again = NULL;
	/* Other bytes (of the same length) stop the load before they are
	 * parsed, whatever the file's look says. */
	write_file(b, "profiles = ( { name = \"pB\"; device = \"d\"; } );\n");
	assert_int_equal(config_load_known(main_path, cfg, &again), -ESTALE);
	assert_null(again);
	config_free(cfg);

	/* A file added to the directory. */
	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_true(config_sources_unchanged(cfg));
	write_file(c, "profiles = ( { name = \"pc\"; device = \"d\"; } );\n");
	assert_false(config_sources_unchanged(cfg));
	assert_int_equal(config_load_known(main_path, cfg, &again), -ESTALE);
	config_free(cfg);

	/* A file gone from the directory. */
	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_int_equal(cfg->n_profiles, 3);
	unlink(c);
	assert_false(config_sources_unchanged(cfg));
	assert_int_equal(config_load_known(main_path, cfg, &again), -ESTALE);
	config_free(cfg);

	/* A config read from a string has no files to trust. */
	assert_int_equal(config_load_string("x", HEAD, &cfg), 0);
	assert_false(config_sources_unchanged(cfg));
	config_free(cfg);

	unlink(a);
	unlink(b);
	rmdir(inc);
	unlink(main_path);
	rmdir(dir);
}

/* A reload's read in a child (validate.h) hands the daemon what it read,
 * whole (an image): the same configuration as a load here, files read
 * included, and still that one when a file changes after the child read
 * it (the next reload's). A config with errors says them instead. */
static void test_validated_read(void **state)
{
	struct inc_tree t;
	char *main_path = t.main_path, *inc = t.inc, *dir = t.dir;
	struct config *cfg = NULL, *read = NULL;
	json_t *errors = NULL, *a, *b;
	char a_path[160], *why = NULL;

	(void)state;
	inc_tree_make(&t);
	snprintf(a_path, sizeof(a_path), "%s/10-a.conf", inc);
	write_file(a_path,
		   "profiles = ( { name = \"pa\"; device = \"d\";\n"
		   "  pd = ( { name = \"p0\"; } ); } );\n");

	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(config_validate_isolated(main_path, NULL, &errors,
						  &read, &why),
			 0);
	assert_null(errors);
	assert_null(why);
	assert_non_null(read);
	a = config_json(cfg);
	b = config_json(read);
	assert_true(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	assert_int_equal(read->n_sources, cfg->n_sources);
	for (size_t i = 0; i < read->n_sources; i++) {
		assert_string_equal(read->sources[i].path,
				    cfg->sources[i].path);
		assert_memory_equal(read->sources[i].digest,
				    cfg->sources[i].digest,
				    sizeof(cfg->sources[i].digest));
	}
	assert_true(config_sources_unchanged(read));
	/* Where each object was declared, and its lookup by name. */
	assert_non_null(config_profile(read, "pa"));
	assert_string_equal(config_profile(read, "pa")->loc.file, a_path);
	assert_int_equal(config_profile(read, "pa")->loc.line, 1);
	assert_int_equal(((const struct conf_pd *)conf_obj_find(
				  config_profile(read, "pa"), OBJ_PD, "p0"))
				 ->loc.line,
			 2);

	/* Changed after the child read it: what it read stands, and no
	 * longer looks like the files (the next reload reads them). */
	write_file(a_path,
		   "profiles = ( { name = \"pA\"; device = \"d\"; } );\n");
	assert_non_null(config_profile(read, "pa"));
	assert_false(config_sources_unchanged(read));
	config_free(read);
	read = NULL;

	/* Errors are said, nothing read is. */
	write_file(a_path,
		   "profiles = ( { name = \"pa\"; device = \"nod\"; } );\n");
	assert_int_equal(config_validate_isolated(main_path, NULL, &errors,
						  &read, &why),
			 -EINVAL);
	assert_true(json_array_size(errors) > 0);
	assert_null(read);
	json_decref(errors);

	config_free(cfg);
	unlink(a_path);
	rmdir(inc);
	unlink(main_path);
	rmdir(dir);
}

/* A config with n objects of each of several kinds, one per line, in a
 * string the caller frees. Line numbers: HEAD is line 1, the profile
 * line 2, then each list opens on its own line and holds one object a
 * line, so object i of list l (0-based) is on line 3 + l * (n + 2) + 1 + i. */
enum { BIG_LISTS = 6 };

static char *big_config(size_t n, const char *pd_ref_prefix)
{
	static const char *const heads[BIG_LISTS] = {
		"pd", "memory", "cq", "srq", "mr", "qp",
	};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	fputs(HEAD "profiles = ( { name = \"p\"; device = \"d\";\n", f);
	for (int l = 0; l < BIG_LISTS; l++) {
		fprintf(f, "%s = (\n", heads[l]);
		for (size_t i = 0; i < n; i++) {
			const char *sep = i + 1 < n ? "," : "";

			switch (l) {
			case 0:
				fprintf(f, "{ name = \"pd%zu\"; }%s\n", i, sep);
				break;
			case 1:
				fprintf(f, "{ name = \"m%zu\"; size = 4096; }%s\n",
					i, sep);
				break;
			case 2:
				fprintf(f, "{ name = \"cq%zu\"; cqe = 16; }%s\n",
					i, sep);
				break;
			case 3:
				fprintf(f, "{ name = \"s%zu\"; pd = \"pd%zu\"; "
					   "max_wr = 64; }%s\n",
					i, i, sep);
				break;
			case 4:
				fprintf(f, "{ name = \"mr%zu\"; pd = \"%s%zu\"; "
					   "memory = \"m%zu\"; access = "
					   "[\"local_write\"]; }%s\n",
					i, pd_ref_prefix, i, i, sep);
				break;
			case 5:
				fprintf(f, "{ name = \"q%zu\"; pd = \"pd%zu\"; "
					   "type = \"rc\"; send_cq = \"cq%zu\"; "
					   "recv_cq = \"cq%zu\"; srq = \"s%zu\"; "
					   "state = \"rts\"; peer = \"q%zu\"; }%s\n",
					i, i, i, (n - 1 - i), i, i ^ 1, sep);
				break;
			}
		}
		fputs(");\n", f);
	}
	fputs("} );\n", f);
	assert_int_equal(fclose(f), 0);
	return text;
}

static int big_line(size_t n, int list, size_t i)
{
	return 3 + list * (int)(n + 2) + 1 + (int)i;
}

/* Thousands of objects: no errors, and every one is found by name. */
static void test_many_objects(void **state)
{
	static const enum obj_kind kinds[] = {
		OBJ_PD, OBJ_MEMORY, OBJ_CQ, OBJ_SRQ, OBJ_MR, OBJ_QP,
	};
	const size_t n = 3000; /* even: each QP's peer is its neighbour */
	char *text = big_config(n, "pd");
	struct config *cfg = NULL;
	const struct conf_profile *p;

	(void)state;
	assert_int_equal(config_load_string("big.conf", text, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	p = &cfg->profiles[0];
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		assert_int_equal(p->n_objs[kinds[k]], n);
		for (size_t i = 0; i < n; i++) {
			const void *o = conf_obj(p, kinds[k], i);

			assert_ptr_equal(conf_obj_find(p, kinds[k],
						       conf_obj_name(o)),
					 o);
			assert_int_equal(((const struct conf_loc *)o)->line,
					 big_line(n, (int)k, i));
		}
	}
	assert_null(conf_obj_find(p, OBJ_PD, "pd3000"));
	assert_null(conf_obj_find(p, OBJ_PD, "cq0")); /* another kind's */
	assert_null(conf_obj_find(p, OBJ_PD, NULL));
	assert_ptr_equal(config_device(cfg, "d"), &cfg->devices[0]);
	assert_null(config_device(cfg, "e"));
	assert_null(config_device(cfg, NULL));
	assert_ptr_equal(config_profile(cfg, "p"), p);
	assert_null(config_profile(cfg, "q"));
	assert_null(config_profile(cfg, NULL));
	config_free(cfg);
	free(text);
}

static bool has_error(const struct config *cfg, const char *file, int line,
		      const char *msg)
{
	for (size_t i = 0; i < cfg->n_errors; i++)
		if (!strcmp(cfg->errors[i].loc.file, file) &&
		    cfg->errors[i].loc.line == line &&
		    !strcmp(cfg->errors[i].msg, msg))
			return true;
	config_print_errors(cfg, stderr);
	fail_msg("no error '%s:%d: %s'", file, line, msg);
	return false;
}

/* Every MR names a PD that is not there: one error each, in line order,
 * worded as for a single one. */
static void test_many_dangling(void **state)
{
	const size_t n = 2000;
	char *text = big_config(n, "nopd");
	struct config *cfg = NULL;
	char msg[128];

	(void)state;
	assert_int_equal(config_load_string("big.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, n);
	for (size_t i = 0; i < n; i++) {
		snprintf(msg, sizeof(msg),
			 "mr 'mr%zu': pd 'nopd%zu' is not declared in profile "
			 "'p'",
			 i, i);
		assert_int_equal(cfg->errors[i].loc.line, big_line(n, 4, i));
		assert_string_equal(cfg->errors[i].msg, msg);
	}
	config_free(cfg);
	free(text);
}

/* Duplicates among many: each names the first, with its file:line. */
static void test_many_duplicates(void **state)
{
	const size_t n = 2000;
	char *text = NULL, msg[128];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct config *cfg = NULL;

	(void)state;
	assert_non_null(f);
	/* devices d0..d(n-1) on lines 2.., then d0 again and d7 twice. */
	fputs("devices = (\n", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "{ name = \"d%zu\"; match = { ibdev = \"x\"; }; },\n",
			i);
	fputs("{ name = \"d0\"; match = { ibdev = \"x\"; }; },\n", f);
	fputs("{ name = \"d7\"; match = { ibdev = \"x\"; }; },\n", f);
	fputs("{ name = \"d7\"; match = { ibdev = \"x\"; }; } );\n", f);
	/* profile p with pds a0..a(n-1), a5 again, then profile p again. */
	fputs("profiles = ( { name = \"p\"; device = \"d1\"; pd = (\n", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "{ name = \"a%zu\"; },\n", i);
	fputs("{ name = \"a5\"; } ); },\n", f);
	fputs("{ name = \"p\"; device = \"d2\"; } );\n", f);
	assert_int_equal(fclose(f), 0);

	assert_int_equal(config_load_string("dup.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 5);
	has_error(cfg, "dup.conf", (int)n + 2,
		  "duplicate device 'd0' (first at dup.conf:2)");
	has_error(cfg, "dup.conf", (int)n + 3,
		  "duplicate device 'd7' (first at dup.conf:9)");
	has_error(cfg, "dup.conf", (int)n + 4,
		  "duplicate device 'd7' (first at dup.conf:9)");
	snprintf(msg, sizeof(msg), "duplicate pd 'a5' (first at dup.conf:%d)",
		 (int)n + 11);
	has_error(cfg, "dup.conf", 2 * (int)n + 6, msg);
	snprintf(msg, sizeof(msg),
		 "duplicate profile 'p' (first at dup.conf:%d)", (int)n + 5);
	has_error(cfg, "dup.conf", 2 * (int)n + 7, msg);
	/* A name looked up finds the first of its duplicates. */
	assert_ptr_equal(config_device(cfg, "d7"), &cfg->devices[7]);
	assert_ptr_equal(config_profile(cfg, "p"), &cfg->profiles[0]);
	assert_ptr_equal(conf_obj_find(&cfg->profiles[0], OBJ_PD, "a5"),
			 conf_obj(&cfg->profiles[0], OBJ_PD, 5));
	config_free(cfg);
	free(text);
}

/* Objects without a name (an error of their own) are skipped by the
 * duplicate check, and whatever names them or they name is safe. */
static void test_no_names(void **state)
{
	static const char text[] =
		"devices = ( { match = { ibdev = \"x\"; }; },\n"
		" { match = { ibdev = \"y\"; }; },\n"
		" { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"
		"profiles = ( { name = \"p\"; device = \"d\";\n"
		"pd = ( { }, { }, { name = \"a\"; } );\n"
		"cq = ( { name = \"c\"; } );\n"
		"mr = ( { pd = \"zz\"; memory = \"mm\"; } );\n"
		"qp = ( { type = \"rc\"; pd = \"a\"; send_cq = \"c\"; recv_cq = "
		"\"c\"; state = \"rts\"; peer = \"q\"; },\n"
		" { name = \"q\"; type = \"rc\"; pd = \"a\"; send_cq = \"c\"; "
		"recv_cq = \"c\"; state = \"rts\"; peer = \"r\"; },\n"
		" { name = \"r\"; type = \"rc\"; pd = \"a\"; send_cq = \"c\"; "
		"recv_cq = \"c\"; state = \"rts\"; peer = \"q\"; },\n"
		" { type = \"uc\"; pd = \"a\"; send_cq = \"c\"; recv_cq = \"c\"; "
		"state = \"rts\"; peer = \"q\"; } ); },\n"
		" { device = \"d\"; }, { device = \"d\"; } );\n";
	struct config *cfg = NULL;
	const struct conf_profile *p;
	struct conf_ref refs[CONF_MAX_REFS];

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	has_error(cfg, "t.conf", 1, "device: missing required key 'name'");
	has_error(cfg, "t.conf", 2, "device: missing required key 'name'");
	has_error(cfg, "t.conf", 5, "pd: missing required key 'name'");
	has_error(cfg, "t.conf", 7,
		  "mr '?': pd 'zz' is not declared in profile 'p'");
	has_error(cfg, "t.conf", 7,
		  "mr '?': memory 'mm' is not declared in profile 'p'");
	has_error(cfg, "t.conf", 8,
		  "qp '?': its peer 'q' must name '?' as peer too");
	has_error(cfg, "t.conf", 11,
		  "qp '?': its peer 'q' must name '?' as peer too");
	has_error(cfg, "t.conf", 12, "profile: missing required key 'name'");
	for (size_t i = 0; i < cfg->n_errors; i++)
		assert_null(strstr(cfg->errors[i].msg, "duplicate"));
	p = &cfg->profiles[0];
	assert_null(conf_obj_find(p, OBJ_PD, NULL));
	assert_ptr_equal(conf_obj_find(p, OBJ_PD, "a"), conf_obj(p, OBJ_PD, 2));
	assert_null(conf_obj_name(conf_obj(p, OBJ_QP, 0)));
	assert_int_equal(conf_obj_refs(OBJ_MR, conf_obj(p, OBJ_MR, 0), refs,
				       CONF_MAX_REFS),
			 2);
	assert_null(config_profile(cfg, NULL));
	assert_ptr_equal(config_device(cfg, "d"), &cfg->devices[2]);
	config_free(cfg);
}

/* The 32-bit literal check still finds its line deep in a big file, on a
 * line of its own and on a long line of many objects. */
static void test_wide_literal_deep(void **state)
{
	const size_t n = 3000;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct config *cfg = NULL;

	(void)state;
	assert_non_null(f);
	/* line 3: the list; object i on line 4 + i */
	fputs(HEAD "profiles = ( { name = \"p\"; device = \"d\";\ncq = (\n",
	      f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "{ name = \"c%zu\"; cqe = %s; },\n", i,
			i == 2000 ? "4294967424" : "64");
	/* line n + 4: every object on one line, the last one too wide
	 * (and cut to 16, which no other literal of the line is) */
	for (size_t i = 0; i < n; i++)
		fprintf(f, "{ name = \"l%zu\"; cqe = %s; }%s", i,
			i == n - 1 ? "0x100000010" : "64", i + 1 < n ? ", " : "");
	fputs("\n); } );\n", f);
	assert_int_equal(fclose(f), 0);

	assert_int_equal(config_load_string("w.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 2);
	has_error(cfg, "w.conf", 2004,
		  "cq 'c2000': 'cqe' = 4294967424 does not fit in 32 bits, "
		  "which libconfig keeps without a suffix: write 4294967424L "
		  "(or a size string such as \"5G\")");
	has_error(cfg, "w.conf", (int)n + 4,
		  "cq 'l2999': 'cqe' = 0x100000010 does not fit in 32 bits, "
		  "which libconfig keeps without a suffix: write 0x100000010L "
		  "(or a size string such as \"5G\")");
	config_free(cfg);
	free(text);
}

/* A file of n bytes: a valid configuration padded with comment lines. */
static void write_sized(const char *path, size_t n)
{
	static const char head[] = HEAD;
	FILE *f = fopen(path, "w");
	size_t left = n - (sizeof(head) - 1);

	assert_non_null(f);
	fputs(head, f);
	while (left) {
		char line[64];
		size_t len = left < sizeof(line) ? left : sizeof(line);

		memset(line, ' ', len);
		line[0] = '#';
		line[len - 1] = '\n';
		assert_int_equal(fwrite(line, 1, len, f), len);
		left -= len;
	}
	assert_int_equal(fclose(f), 0);
}

/* The limit is 16 MiB: 16 MiB - 1 and 16 MiB are read, one byte more
 * is refused. */
static void test_file_limit(void **state)
{
	static const size_t sizes[] = { (16 << 20) - 1, 16 << 20,
					(16 << 20) + 1 };
	char dir[] = "/tmp/rdmad-limit-XXXXXX", path[64];
	struct config *cfg = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/rdmad.conf", dir);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		write_sized(path, sizes[i]);
		assert_int_equal(config_load(path, &cfg), 0);
		if (i < 2) {
			if (cfg->n_errors)
				config_print_errors(cfg, stderr);
			assert_int_equal(cfg->n_errors, 0);
		} else {
			assert_int_equal(cfg->n_errors, 1);
			assert_non_null(strstr(cfg->errors[0].msg,
					       "larger than the limit of 16 MiB"));
		}
		cfg = config_free(cfg);
	}
	unlink(path);
	rmdir(dir);
}

/* A FIFO, as the main file or in the include directory, is refused at
 * once (nothing writes to it: a blocking open would wait forever), and
 * so is a directory named like a file; an empty include directory is
 * fine. */
static void test_not_regular(void **state)
{
	char dir[] = "/tmp/rdmad-fifo-XXXXXX";
	char main_path[64], inc[64], fifo[80], sub[80], text[160];
	struct config *cfg = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(main_path, sizeof(main_path), "%s/rdmad.conf", dir);
	snprintf(inc, sizeof(inc), "%s/d", dir);
	snprintf(fifo, sizeof(fifo), "%s/d/10-fifo.conf", dir);
	snprintf(sub, sizeof(sub), "%s/d/20-dir.conf", dir);
	assert_int_equal(mkdir(inc, 0700), 0);
	snprintf(text, sizeof(text), "daemon = {\n include = \"d\"; };\n");
	write_file(main_path, text);

	/* empty: no error (and no UBSan report) */
	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	cfg = config_free(cfg);

	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(config_load(main_path, &cfg), 0);
	has_error(cfg, fifo, 0, "cannot read: is a FIFO, not a regular file");
	has_error(cfg, sub, 0, "cannot read: is a directory, not a file");
	assert_int_equal(cfg->n_errors, 2);
	cfg = config_free(cfg);

	/* the FIFO as the main file */
	assert_int_equal(config_load(fifo, &cfg), 0);
	has_error(cfg, fifo, 0, "cannot read: is a FIFO, not a regular file");
	cfg = config_free(cfg);

	/* a missing include directory: at the line that names it */
	rmdir(sub);
	unlink(fifo);
	rmdir(inc);
	assert_int_equal(config_load(main_path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 1);
	assert_int_equal(cfg->errors[0].loc.line, 2);
	cfg = config_free(cfg);
	unlink(main_path);
	rmdir(dir);
}

/* libconfig would stop at a NUL byte and ignore the rest of the file. */
static void test_nul_byte(void **state)
{
	static const char text[] = HEAD "\nfoo\0 = 1;\n";
	char path[] = "/tmp/rdmad-nul-XXXXXX";
	struct config *cfg = NULL;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1),
			 (ssize_t)sizeof(text) - 1);
	close(fd);
	assert_int_equal(config_load(path, &cfg), 0);
	has_error(cfg, path, 3, "a NUL byte: this is not a text file");
	config_free(cfg);
	unlink(path);
}

/* What libconfig itself does not take for a directive or a literal is
 * not one: @include in a comment or a string, digits in names, 010 is
 * ten. */
static void test_literals_in_context(void **state)
{
	static const char text[] =
		"/* @include \"x\"\n"
		"@include \"y\" */\n"
		"# cqe = 5368709120\n"
		"devices = ( { name = \"d2\"; match = { ibdev = \"rx\n"
		"@include 4294967296\"; }; } );\n"
		"profiles = ( { name = \"p\"; device = \"d2\";\n"
		"cq = ( { name = \"c0x1\"; cqe = 010; }, { name = \"e1\"; cqe = +7; } );\n"
		"allow = { uids = [ 0x10L, 2L, 4294967294L ]; }; } );\n";
	struct config *cfg = NULL;
	const struct conf_cq *cq;

	(void)state;
	assert_int_equal(config_load_string("l.conf", text, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	cq = conf_obj(&cfg->profiles[0], OBJ_CQ, 0);
	assert_int_equal(cq->cqe, 10);
	assert_int_equal(cfg->profiles[0].allow_uids[2], 4294967294LL);
	config_free(cfg);
}

/* Messages are UTF-8 whatever the input holds, even where a fixed buffer
 * cuts a long name inside a character. */
static void test_messages_utf8(void **state)
{
	char text[1024], name[300];
	struct config *cfg = NULL;
	size_t off = 0;

	(void)state;
	for (int i = 0; i < 99; i++)
		off += (size_t)snprintf(name + off, sizeof(name) - off,
					"\xc3\xa9");
	snprintf(text, sizeof(text),
		 PROFILE("cq = ( { name = \"x%s\"; cqe = 0; } );\n"
			 "pd = ( { name = \"\xe2\x82\"; } );"),
		 name);
	assert_int_equal(config_load_string("u\xff.conf", text, &cfg), 0);
	assert_true(cfg->n_errors >= 3);
	for (size_t i = 0; i < cfg->n_errors; i++) {
		json_t *j = json_string(cfg->errors[i].msg);

		assert_non_null(j); /* jansson takes UTF-8 only */
		json_decref(j);
		j = json_string(cfg->errors[i].loc.file);
		assert_non_null(j);
		json_decref(j);
	}
	assert_string_equal(cfg->errors[0].loc.file, "u\xef\xbf\xbd.conf");
	config_free(cfg);
}

/* --dump writes an array with one wide integer all wide: libconfig
 * refuses arrays of mixed widths. */
static void test_dump_wide_array(void **state)
{
	static const char text[] =
		PROFILE("allow = { uids = [ 0L, 4294967294L ]; };");
	struct config *cfg = NULL, *again = NULL;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(config_print(cfg, f), 0);
	fclose(f);
	assert_non_null(strstr(out, "uids = [ 0L, 4294967294L ]"));
	assert_int_equal(config_load_string("dump", out, &again), 0);
	assert_int_equal(again->n_errors, 0);
	assert_int_equal(again->profiles[0].allow_uids[1], 4294967294LL);
	config_free(again);
	config_free(cfg);
	free(out);
}

/* Allow lists naming users or groups this host lacks: warnings with
 * file:line, not errors (the file may be meant for another host). */
static void test_identity_warnings(void **state)
{
	static const char text[] =
		"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"
		"profiles = ( { name = \"p\"; device = \"d\";\n"
		"  allow = { users = [ \"root\", \"no-such-user-x\" ];\n"
		"            groups = [ \"root\", \"4242\", \"no-such-group-x\" ];\n"
		"            uids = [ 4242 ]; }; } );\n";
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(config_load_string("w.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(cfg->n_warnings, 2);
	assert_string_equal(cfg->warnings[0].loc.file, "w.conf");
	assert_int_equal(cfg->warnings[0].loc.line, 3);
	assert_non_null(strstr(cfg->warnings[0].msg,
			       "profile 'p': 'users': 'no-such-user-x' is not "
			       "a user on this host"));
	assert_int_equal(cfg->warnings[1].loc.line, 4);
	assert_non_null(strstr(cfg->warnings[1].msg,
			       "'groups': 'no-such-group-x' is not a group"));
	/* Kept: they count once they exist. */
	assert_int_equal(cfg->profiles[0].n_allow_users, 2);
	assert_int_equal(cfg->profiles[0].n_allow_groups, 3);
	config_free(cfg);
}

/* libconfig's own text is "syntax error": it is said once. */
static void test_syntax_error_said_once(void **state)
{
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(
		config_load_string("s.conf", "profiles = ( { name = ; } );",
				   &cfg),
		0);
	assert_int_equal(cfg->n_errors, 1);
	assert_null(strstr(cfg->errors[0].msg, "syntax error: syntax error"));
	assert_non_null(strstr(cfg->errors[0].msg, "syntax error"));
	config_free(cfg);
}

int main(void)
{
	struct CMUnitTest tests[sizeof(bad_cases) / sizeof(bad_cases[0]) + 22];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
		tests[n++] = (struct CMUnitTest){
			.name = bad_cases[i].name,
			.test_func = test_bad,
			.initial_state = (void *)&bad_cases[i],
		};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_good);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_defaults);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_all_errors_reported);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_parse_size);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_missing_file);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_file_too_large);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_include);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sources);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_validated_read);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_many_objects);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_many_dangling);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_many_duplicates);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_no_names);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_wide_literal_deep);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_file_limit);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_not_regular);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_nul_byte);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_literals_in_context);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_messages_utf8);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_dump_wide_array);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_identity_warnings);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_syntax_error_said_once);
	return _cmocka_run_group_tests("config", tests, n, NULL, NULL);
}
