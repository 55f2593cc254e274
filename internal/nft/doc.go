// Package nft is the dataplane of docs/design.md's data flow (internal/graph → internal/nft →
// kernel): its Builder folds the graph's messages into the desired `inet nftpolicy` table, a
// ruleset.Table, and reports each apply's changes (ruleset.Changes). It touches no kernel: the
// same Builder is `nftpolicy render`, internal/explain and, under internal/nft/kernel's Applier
// (which commits each apply's changes as one netlink transaction through internal/nft/ruleset),
// the agent's dataplane. Its tests need no privileges.
//
// # Parts
//
//   - State (decide.go): the sets and policies the graph sent. It enforces the policy model —
//     tiers in order, policies in order, rules in order, first Allow/Deny wins, Pass goes to the
//     next tier, a tier's default when policies of it applied and none decided, allow after the
//     last tier — whose reference evaluator, graphtest.Evaluate, the tests compare every compiled
//     shape with.
//   - Compile (decide.go, plan.go): resolves that order, in Go, for one endpoint group, direction
//     and family into a Decision. A plan flattens the group's rules (leaving out those that can
//     match nothing here), cuts the address space by their prefixes in one sweep, and computes a
//     peer's class once per distinct signature (its interval's ipBlock rules, the referenced
//     sets holding it, the peer's named ports) and once per distinct list of matching rules,
//     by painting each rule's port ranges (ICMP: type<<8 | code ranges) over the ports still
//     undecided; Log rules (with a deny log) mark what they match with their reason, so an
//     outcome is (logs, verdict). Every step spends
//     from a budget (Config.CompileBudget, DefaultCompileBudget): a group whose compile runs out
//     has its costliest policy rejected (State.reject: an allow-only policy keeps isolating but
//     allows nothing; any other denies everything at its place), reported through
//     Config.Rejected and the log, and is compiled again; its other policies, and every other
//     group, are enforced as written.
//   - compileList (list.go): a group whose rules all allow (no Deny, no Pass, no Log rule that
//     logs, no ICMP type/code, no source port: the NetworkPolicy tier) needs no order resolved — a packet is allowed if any rule matches — and, with at
//     most maxListRules (8) rules, is compiled into that short list of accepting rules over sets
//     shared by the whole table (shared.go): the listed shape. Every other group gets the map
//     shape (a Decision).
//   - compileOrdered (ordered.go): a host endpoint stage's group dispatched by interface has
//     the packet's own address as its local side; when its rules read it, the group is its
//     rules in evaluation order as list rules whose local-side matches are lookups of that
//     address in the shared sets, Deny rules going to their outcome's class chain: the
//     ordered shape, a listed group of up to maxOrderedRules (32) rules.
//   - GroupKey (group.go): endpoints whose keys are equal (same ordered tiers and policies, same
//     local-side facts) share one Decision, hence one chain. A group is named by its direction and
//     a hash of its lowest address (groupName), not by its key: a group whose policies change keeps
//     its name, and the group taking a name takes its objects (placement), changed in place.
//   - compileUnion (union.go): a map-shaped group of one tier whose rules all allow single ports
//     from selector peers (NetworkPolicy's common case) is compiled as the union of its rules'
//     grants per peer, without a plan, into the same table as the plan's; kept per policy, and
//     compiled again only in the policies that changed when its name's previous compile was a
//     union.
//   - domainRules (domain.go): a rule whose peer is a domainNames pattern matches nothing in the
//     three shapes (its addresses are learnt at run time); the group's chain evaluates it in
//     front of the shape instead, in the policy's order (a lookup in the pattern's timed set; the
//     Allow, Deny and Pass rules between, in a chain of the group's own once a Deny or a Pass
//     comes, which returns what they match to the shape), up to the
//     first rule it cannot evaluate there; the pattern's sets (`fqdn4_`/`fqdn6_`, ruleset.Set.Timeout) are shared sets
//     whose elements the agent writes.
//   - Builder (builder.go): folds messages into the State, brings the table up to date on
//     Apply (regroup the dirty endpoints, recompile the stale groups, again for the policies a
//     compile rejected) and hands over the apply's changes. Its state is split by concern, each
//     part a type of its own:
//   - layout (endpoints.go): endpoints → dispatch elements → groups (a group: one chain and its
//     maps, or a listed chain), the anti-spoofing elements and the workload prefixes checked.
//   - objects (layout.go, shared.go): the objects several others use — class chains, shared sets,
//     deny chains — each counted by a refs (refcount.go), whose acquire reports the first holder
//     and release the last: the object is put into the table at exactly the first and dropped at
//     exactly the last.
//   - index (index.go): set → policies, policy → groups, policy → endpoints, address → local
//     endpoint, what incremental work looks up.
//   - pending (pending.go): the work of one apply (policies, endpoints and groups made dirty, the
//     policies rejected meanwhile) and the chains and sets it put or dropped (ruleset.Changes).
//   - setSizes (sizes.go): the size each large set is made with when the table is written whole.
//   - Counted (counts.go): what the kernel counts in a committed table (deny chains and their
//     reasons, counting chains and sets), taken after each commit; the applier reads the kernel's
//     counters by it on any goroutine and sums them per reason or per PolicyCount. The table is
//     walked for it only when a chain or set put or dropped since the last snapshot is a deny, log
//     or counting object (pending records them); otherwise that snapshot is kept, so a commit of
//     element changes alone costs no walk (TestCountedMatchesWalk).
//
// # Table layout
//
//	table inet nftpolicy
//	  chain forward_egress   hook forward priority 7; policy accept
//	      iifname "<prefix>*" iifname . ip saddr != @sources_v4 goto deny_spoofed   (and ip6)
//	      ct state established,related accept; ct state invalid counter drop
//	      ip saddr vmap @egress_v4; ip6 saddr vmap @egress_v6        (local pod → its egress group)
//	  chain forward_ingress  hook forward priority 8; policy accept
//	      ct state established,related accept
//	      oifname "<prefix>*" oifname . ip daddr != @sources_v4 goto deny_unprogrammed   (and ip6)
//	      ip daddr vmap @ingress_v4; ip6 daddr vmap @ingress_v6      (local pod → its ingress group)
//	  chain input_host       hook input priority 7   (pod → this node)
//	      ct state established,related accept; meta l4proto ipv6-icmp accept
//	      ip saddr vmap @egress_v4; ip6 saddr vmap @egress_v6        (the pod's egress, as forward)
//	  chain output_host      hook output priority 8  (this node → its pods: accepted, kubelet probes)
//	  with host endpoints, the node's own traffic after these (host.go): loopback, workload
//	  interfaces, failsafe ports and the API server pass; then iifname . ip daddr vmap
//	  @host_in_if_v4, ip daddr vmap @host_in_v4 (oifname . ip saddr, ip saddr on output)
//	  with host endpoint stages (hoststage.go), each from its first policy on: raw_in, raw_out
//	  (doNotTrack, priority raw), notrack_in, notrack_out (raw + 10), prednat (preDNAT,
//	  dstnat - 10), fwd_in, fwd_out (applyOnForward, forward filter + 5, + 6), an allow before
//	  conntrack or DNAT carried to the later chains by mark bit 0x00800000
//	  chain in_<hash> / eg_<hash>                   one per endpoint group, direction and family
//	    listed shape (list.go):
//	      [meta l4proto P] <peer> @sel_<set>_v4 [<peer> != @sel_…] [<peer> @nets_<hash>_v4]
//	          [meta l4proto . th dport @ports_<hash>
//	           | ip daddr . meta l4proto . th dport @np_<set>_v4] accept     ≤ 8 rules, one per
//	                                         allow rule and port alternative, in rule order
//	      goto c_<hash>                      the final outcome (tier default, else allow)
//	    ordered shape (ordered.go): the same rules, ≤ 32, with [<local> @sel_…] [<local> @nets_…]
//	      lookups of the packet's own address, a Deny's `goto c_<hash>` of its outcome
//	    map shape:
//	      <peer> . meta l4proto . th dport @in_<hash>_allow accept
//	                                         fast path: peers whose class is the fall-through class
//	                                         plus a few allowed ports (fast.go); no goto element
//	      <peer> vmap @in_<hash>_peers       exact: the other addresses the rules' selectors name
//	      <peer> vmap @in_<hash>_nets        interval: disjoint ipBlock partition (except subtracted)
//	      goto c_<hash>                      every other peer
//	  chain c_<hash>                                 one per distinct peer class (shared by groups)
//	      meta l4proto vmap @c_<hash>_l4                 protocols without ports (ICMP)
//	      meta l4proto . th sport vmap @c_<hash>_sports  interval: source-port ranges → goto the
//	                                                     class of their destination ports (classes
//	                                                     whose rules have source ports)
//	      meta l4proto . th sport vmap @c_<hash>_icmp    interval: ICMP protocol . type<<8 | code
//	                                                     (classes whose rules have ICMP type/code)
//	      meta l4proto . th dport vmap @c_<hash>_ports   interval: disjoint protocol × port partition
//	      accept | goto deny_<hash> | goto log_<hash>    every other packet
//	  chain deny_<hash>                              one per deny reason: counter drop
//	  chain log_<hash>                               one per distinct (Log rules, verdict), with a
//	                                                 deny log: per Log rule `limit … log prefix
//	                                                 "log_<hash>.<i>" group N`, then the verdict
//	  set sel_<set>_v4 / np_<set>_v4                one per selector / named-port set that listed
//	                                                 groups reference: its members, once per table
//	  set nets_ / ports_<hash>                       content-addressed ipBlock ranges and port
//	                                                 lists of listed rules
//	  set sources_v4 / sources_v6   ifname . address of each local pod whose interface is known
//	  chain deny_spoofed, deny_unprogrammed          counter drop
//
// Anti-spoofing (with Config.WorkloadPrefixes): every packet forwarded from a workload interface,
// established ones included, must carry a source address of the pod that interface leads to. A
// spoofed source is dropped, and so is everything from an interface whose endpoint is not
// programmed yet (fail closed). Likewise a new connection forwarded to a workload interface passes
// only to the address of the pod behind it once that pod is programmed: a pod the agent does not
// know yet receives nothing (deny_unprogrammed counts it), whatever its namespace's policy, until
// its endpoint and its interface are both known — one API event and one route event, then one
// apply. A pod without policy is reachable from then on. A prefix is checked from the first local
// endpoint whose interface has it (its rules then stay). With a bridge CNI the interface is the
// pod's bridge port, which the inet hooks never see (br_netfilter shows them the bridge): the
// prefix rules here stay inert, and internal/nft/kernel's bridge companion table checks the ports
// by CheckedPrefixes and the sources sets. Traffic from a pod to its own node (input) is not
// checked here: it carries IPv6 neighbour discovery from link-local addresses.
//
// A pod's traffic to its own node is judged by its egress policy in input_host, as its traffic
// to another node is in forward_egress, so a rule about node addresses (a ClusterNetworkPolicy
// node peer, a CIDR) holds wherever the node is. ICMPv6 to the own node is accepted first:
// neighbour discovery of the pod's gateway may carry the pod's address. The node's traffic to
// its pods (kubelet probes) is not policed (output_host), nor are the replies to it.
//
// Egress is judged at priority 7 and ingress at 8, both on the forward hook (egress to the
// node itself at 7 on the input hook): an accept in
// forward_egress ends only that base chain, so same-node pod → pod traffic is judged by the
// source's egress and then by the destination's ingress. A pod without policy in a direction has
// no element in that direction's dispatch map and is allowed. Decision chains are entered with
// goto and end in an explicit verdict. Priorities 7 and 8 are used by none of kube-proxy (dstnat
// -100, filter 0), Felix or kube-network-policies. The packet mark is never touched.
//
// Comments name the origin of every verdict: dispatch elements name the pod, group chains their
// lowest address (a chain keeps the comment it was created with, so it names only what its name
// is a hash of) and their last rule the ordered policies, peer elements and class chains the
// rules (or tier defaults) that decide, and
// each deny chain the reason it counts — nftpolicy_denied_packets_total{reason} reads those
// counters.
//
// # Costs
//
//   - First packet of a connection: conntrack, one dispatch lookup per direction, then per
//     direction — map shape: at most one allow-set, one exact and one interval peer lookup and
//     one protocol and one protocol.port lookup (an ICMP packet: protocol.type.code instead; a
//     packet of a class with source ports: one protocol.source port lookup more, then its
//     class's protocol.port lookup), whatever the number of policies; a packet Log rules match
//     meets one log statement per such rule; listed shape:
//     at most 8 rules of a few set lookups each (a group with more rules takes the map shape).
//   - Compile of a map-shaped group: O(R·(A + I) + P log P) at worst for R rules, P prefixes,
//     I ≤ 2P+1 elementary intervals and A known peers (plan's comment), bounded by the budget
//     (DefaultCompileBudget: at most 2,000,000 class elements); BenchmarkLargePolicy checks that
//     a policy of 200 rules × 50 peers over 10,000 pods compiles within it.
//   - Listed shape: no element per group; each selector's members once per table, however many
//     groups use it (the map shape holds a selector's members once per group using it). A pod
//     joining or leaving a selector is one plain element of its sel_ set, whatever the number of
//     groups.
//   - Map shape, elements per group and family: known peers + ipBlock intervals; per class: its
//     port segments (and ICMP segments). Class chains are content-addressed and shared by all
//     groups. A class whose rules have s source-port ranges of a protocol costs at most 2s+1
//     paints of that protocol and as many classes of destination ports, all within the budget.
//     Log chains are content-addressed and shared by the class chains and maps leading to them.
//   - Map shape, a pod joining or leaving a selector (SetMembersChanged): in each group whose rules
//     reference the set, only that address's class is recomputed (compiled.recompilePeer, with the
//     group's plan kept from its last full compile) and its elements changed; a local endpoint is
//     regrouped only if its own address changed membership. Elements change in place through
//     Set.Put and Delete, whose journal gives the commit exactly the changed keys and their
//     committed values, so its cost does not grow with the set. A fast peer's elements are plain
//     (allow set); a goto element (peers map) makes the kernel validate the table's whole jump
//     graph in the commit, in time proportional to the table's verdict-map elements, while a plain
//     element's commit does not grow with the table — hence the fast path.
//   - A policy change, a new set or a regrouped endpoint: the groups concerned are recompiled;
//     their unchanged elements are not sent. A map-shaped group is compiled in full. A union
//     group compiled under the name of a previous union compiles only the policies that differ
//     between the tier lists (common head and tail) or changed meanwhile, then grants anew only
//     the peers of their rules and of dirty addresses and changes their allow elements in place:
//     one policy added to or removed from 10,000 costs O(10,000) key comparisons (the index's and
//     the union's diffs, the group key's streamed hash) and its own rules and peers
//     (BenchmarkManyPolicies). A group whose lowest address changes is renamed: its chain and
//     maps are put anew and its members' dispatch elements changed. Compiles run on all
//     processors at once (a compile reads the State and writes only its group's union); their
//     results are laid out in the table one at a time, in name order.
//   - Memory: per map-shaped group the decision (peer → interned class key) and, for plans with
//     more than 16 referenced sets, an index of peer → sets. Each address set's members are held
//     once: the State keeps them in two per-family plain address sets (ruleset.NewAddrSet, 4 bytes
//     an IPv4 address and 16 an IPv6 one, no pointers), which are the table's shared selector sets
//     themselves when a listed group uses them, and whose elements the committer's mirror shares
//     (ruleset's journal); named-port sets keep a member count per address. Apply consumes its
//     messages (a first flush's member lists are dropped once folded, not held to the commit).
//   - Set sizes (sizes.go: setSize): when the table is written whole (the first commit, a
//     resync), a set without interval of at least 1,024 elements is made with a size, the power of
//     two at or above twice its elements. The kernel then lays its hash table out at once instead
//     of growing it (and re-hashing its elements) as they arrive. The size is the most elements the
//     kernel accepts and is kept for the set's life: later commits keep it (a set put again under
//     its name takes it back), and an apply that leaves a set over its size replaces the table,
//     sizing every set anew — once per doubling of a set. Sets made by a later commit, and smaller
//     ones, have none.
//   - Measured (BENCHMARKS.md, with the command for each): the first full apply of a cluster of
//     100,000 pods (test/bench BenchmarkColdStart), one pod joining or leaving a selector
//     (BenchmarkIncremental) and one policy added to or removed from 10,000 that select one pod
//     (BenchmarkManyPolicies).
//
// # Invariants
//
//   - After every Apply the desired table equals what a fresh Builder computes from the same
//     messages (TestIncrementalMatchesFresh), but for set sizes, which depend on when the table
//     was last written whole (TestSetSizes), and the compiled structure, of either shape, gives
//     every packet the model's outcome (TestCompileMatchesModel).
//   - A shared set exists exactly while a listed group's chain looks it up, and holds the
//     State's members of its set and family: for an address set the table holds the State's own
//     storage (TestSharedSelectorSetsAreStateStorage), which keeps living, unjournaled, when the
//     table drops it.
//   - A class chain, shared set or deny chain is in the table exactly while its refs count is
//     above zero; a group acquires what its new compile uses before releasing what its previous
//     one used, so an object both use is never dropped and put again in one apply.
//   - The Builder never touches the kernel: it has no connection, and nothing in this package
//     opens one (internal/nft/kernel does).
//   - All endpoints of a group have equal local-side facts (GroupKey), so its compile may read
//     any one of them: the lowest address, which names the group (a new lowest renames it).
//   - A group's name is a function of its direction and lowest address, so each name is held by
//     at most one group and a fresh Builder names every group alike; a union group's table equals
//     the one the plan's map shape lays out (TestUnionIncrementalMatchesFresh).
//   - A dispatch or sources element is keyed by an address, and the graph gives each address
//     one local endpoint (dataplane.EndpointUpdated.Addrs). One apply may move an address from
//     one endpoint to another: the dirty endpoints are regrouped in two passes, every
//     withdrawal (left groups, deleted dispatch and sources elements) before any put, so the
//     old owner's delete never takes the new owner's element (TestSharedAddressInKernel,
//     TestIncrementalSharedAddresses).
//
// # What the applier relies on
//
// Builder.Apply returns nil before in-sync (nothing is built before the graph's first flush is
// complete), then the changes since the last changes it returned. ResizeSets sizes every set for
// a write of the whole table; RegrowSets sizes anew the sets over their size and names them, for
// a commit that writes those sets anew. Refused answers the kernel's refusal of the whole table naming an object
// (ruleset.KernelError): the costliest policy of the groups that object belongs to is rejected
// (as for the compile budget, reported through Config.Rejected) and the table brought up to
// date, so that it can be written again with every other policy enforced. Counted names what
// the kernel counts in the table once committed. How and when the table is committed, read back
// and repaired is internal/nft/kernel's.
//
// # Limits (documented, never widening an allow)
//
// A rule with ICMP type/code and another protocol than the family's ICMP protocol matches
// nothing; Log rules log only with a deny log (Config.DenyLog) and change no verdict either way;
// a set the graph has not sent has no members.
package nft
