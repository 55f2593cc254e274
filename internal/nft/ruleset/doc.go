// Package ruleset is the kernel layer of internal/nft: an in-memory model of one `inet` table
// (Table, Chain, Rule, Set, Element), its rendering in `nft -f` syntax, and a committer that sends
// the difference between the committed and the desired table to the kernel as one netlink batch
// (one transaction: all of it or none), encoded by github.com/google/nftables v0.3.0 and by
// wire.go, and sent by wire.go.
//
// # Place in the data flow
//
// docs/design.md §2: graph → internal/nft (compiler: decisions, layout) → ruleset (this package) →
// netlink → kernel. internal/nft owns the desired Table and mutates it in place; for every apply it
// calls Conn.Commit with the Changes it made (sets added, replaced or removed, chains; sets changed
// in place name themselves through their journals), and Conn.Replace at start-up and after a
// failure or drift. The product never executes nft; the tests do, to read back what the kernel holds.
//
// # Invariants
//
//   - The mirror equals what the last successful batch left in the kernel, as far as this process
//     knows (Conn.Committed returns a copy). It shares the elements of the caller's sets rather
//     than copying them (a copy would cost O(elements of the table) per commit and hold every
//     element twice): once committed, a set records in its journal the committed state of every key
//     its Put and Delete change, and the mirror reads the set's elements with those changes undone.
//     Elements of a committed set therefore change only through Put and Delete (a direct write to
//     Set.Elements would be missed by the next Commit, and repaired by the next Verify); a set may
//     be replaced by another object at any time (compared whole). A set that leaves the committed
//     table (or the mirror, on Replace and Delete) may live on with its owner: its journal ends and
//     it records nothing until committed again, whole (TestSetKeptOutsideTable). Chains are copied.
//   - One Commit or Replace is at most one batch (one sendmsg): the kernel applies all of it
//     or none. A batch the kernel refuses fails with a KernelError per refused message, naming
//     the object (table, chain or set) the message changed: the batch marks which object its
//     messages belong to as it writes them, and the acks are read off the socket with the
//     sequence numbers they answer. A Commit with nothing to change sends nothing. On failure the mirror is unchanged
//     and the netlink connection is replaced (v0.3.0 keeps a marshal error sticky on its Conn and
//     may leave acks of a failed batch unread); the caller then calls Replace.
//   - Render(t) is what `nft list table inet NAME` prints for t once committed, modulo
//     whitespace, counter values and the order of blocks and elements (the kernel lists objects
//     in creation order and elements in its own order). The tests hold this for every step.
//   - A bad object (a verdict without chain, an address of the wrong family, a range in a set
//     without flags interval) fails the call with an error naming it and sends nothing: objects
//     are queued as they are encoded (elements in chunks, so no encoded copy of a whole table is
//     held besides the batch's bytes), and an error part-way abandons the batch with its
//     connection.
//   - A timeout set (Set.Timeout, `flags timeout`) is declared here, its elements are another
//     owner's (the agent's DNS observer): the table holds none, Commit never adds, deletes or
//     compares them, Verify does not read them, a Monitor does not report others' element events
//     in them, and Replace reads them (each with the time it has left) and adds them again in
//     its batch, so a repair keeps them (TestTimeoutSetElementsStayTheOwners).
//
// # Render
//
// Sets and maps sorted by name; base chains in hook order forward, input, output, prerouting
// (then priority);
// regular chains by name; elements sorted by key. Keys print as nft lists them: an address, a
// prefix when a range is exactly one, else first-last; protocols by their /etc/protocols name
// (tcp, udp, sctp, icmp, ipv6-icmp, …); ports as numbers. Base chain priorities print as nft 1.0.6
// does (`filter + 7`, a plain number when no standard priority is within 10). Comments go on sets,
// maps, elements, rules and chains (`comment "…"` first in a chain body); Comment() turns `"` into
// `'`, line breaks into spaces and cuts at 128 bytes, the same way for Render and the kernel.
//
// # Commit: the diff and the batch order
//
// Commit looks at the objects Changes names (nil: every object of both tables) and at every
// committed set whose journal recorded a change. A set or chain present on both sides whose
// properties differ (key, map, interval, comment; hook, priority, comment) cannot be changed in
// place — the kernel silently ignores a new chain comment and a set cannot be retyped while
// rules reference it — so Commit then does a Replace instead. A set whose size alone differs
// (one that outgrew it; not a timeout set) is written anew in the batch: the committed chains
// that look it up are flushed, the set deleted and added with its new size and every element,
// and those chains refilled — O(its elements + those chains' rules, plus a walk of the
// committed rules to find them), the other sets untouched. Otherwise the batch is, in this
// order:
//
//  1. new chains, empty (map elements and rules may jump to them);
//  2. the chains that look up a resized set flushed and that set deleted; new sets, empty
//     (rules may look them up), resized ones among them;
//  3. per set, element deletes (removed elements and the old value of changed ones) and then
//     element adds (new elements and the new value of changed ones): an element whose verdict or
//     comment changed is a delete+add in the same batch, and deleting first lets an interval set
//     be re-partitioned without ever overlapping itself;
//  4. rules of new chains; each chain whose rules changed is flushed and refilled (rules are
//     short; a rule-level diff would need handles, which v0.3.0 does not return from Flush);
//  5. removed chains flushed (all of them before any delete, so jumps between removed chains do
//     not block), removed sets deleted whole, then removed chains deleted. A map is not emptied
//     before its deletion: the kernel releases its elements' references to chains when it
//     deletes the map in the batch (since Linux 6.4 and in the stable kernels that took that
//     fix), so a chain only a removed map jumped to can be deleted after it. Emptying first
//     costs the kernel a transaction record per element, and for a concatenated interval map
//     (pipapo) a rebuild of its lookup tables per element: seconds for a few hundred maps of a
//     few hundred elements. On a kernel without that fix the batch is refused (EBUSY) and the
//     agent's retry replaces the whole table.
//
// The kernel is 6.x: a chain unreferenced by an element deleted earlier in the same batch can be
// deleted in it (kube-proxy waits a second only for kernels before 6.2). After the kernel
// accepted the batch the mirror takes the named objects from desired: chains copied, sets shared
// with a fresh journal. It takes them also when there is nothing to send: a named set may be
// another object holding the same elements, and only the object the mirror shares journals the
// changes the next Commit sends.
//
// Cost: O(keys changed in place + elements of sets replaced by other objects + rules of the named
// chains) per Commit, independent of the table's size (plus a look at each set's journal).
// BenchmarkCommitOneElement measures one element changed in a table of 2,000 sets × 100
// elements, beside the same batch sent straight through google/nftables, and one element in a
// set of 100,000 (the netlink round trip and the kernel's commit dominate; BENCHMARKS.md has the
// figures). A set replaced by another object is diffed whole instead: a map lookup per element
// of either side.
//
// # Replace
//
// One batch: add table (so that the delete cannot fail on a missing table), delete table, add
// table, then every chain (empty), every set with its elements, then every rule. A table of that
// name stays in force until the new one replaces it atomically: start-up without a gap, and the
// repair after drift.
//
// # The wire: how a batch is built and sent (wire.go)
//
// v0.3.0's Flush holds every queued message until the end, then marshals each again and appends the
// copies to one growing slice; its SetAddElements builds each element as attribute values and
// marshals every level into a new slice. That holds several copies of a whole batch live at the
// commit, the agent's peak, and leaves a few hundred bytes of garbage per element. Here a batch is
// built on a second google/nftables Conn (Conn.enc) dialled onto a function instead of a socket
// (its test dial): it encodes tables, chains, sets and rules, and the batch flushes it after each
// chain's rules and before each chunk of elements, so that each message is copied once into the
// wire's blocks (4 KiB growing to 1 MiB, never copied again) and dropped. Set elements are encoded
// straight into the wire by elementMessage, byte for byte as v0.3.0 would (TestElementMessages
// compares them for every key shape, maps, intervals and comments). The blocks go to the kernel in
// one sendmsg (an iovec) on the lasting socket of Conn.nft, which then reads one ack or error per
// message that asked for one, as v0.3.0's Flush does; queries (tables, chains, rules) go through
// Conn.nft. A batch's bytes are thus held once, in the wire, and an element is encoded once, into
// it. The elements of a chunk are built in one slice the batch reuses for every chunk, their keys
// in an arena (keyArena) reset once the chunk is in the wire: writing a whole table allocates no
// key per element.
//
// # Chunking and socket buffers
//
// An element list is one attribute with a 16-bit length, so elements go in chunks of at most 1,000
// elements and about 48 KiB (estimated per element: key, key end, comment, chain name and overhead;
// elementMessage refuses a chunk whose list outgrows the attribute); many messages in one batch are
// still one transaction. 100,000 elements with comments commit in one Replace (TestReplaceScale).
// The lasting netlink socket gets a 512 MiB write buffer (netlink refuses a batch larger than
// sndbuf) and a 256 MiB read buffer (one ack per message, and the echo of a failing message), set
// with SO_SNDBUFFORCE/SO_RCVBUFFORCE through WithSockOptions, so rmem_max/wmem_max do not cap them.
// ENOBUFS or any other failure is returned; the caller's answer is a Replace. TestReplaceScale
// logs the time of a Replace, and of a Verify, of 100,000 elements with comments.
//
// Reading back: the kernel sizes each dump datagram by the largest buffer a recvmsg on the socket
// ever offered, mdlayher/netlink reads with a buffer exactly as large as the datagram it peeked,
// and a hash-set dump re-walks the set from its start for every datagram, so reading n elements
// back costs O(n²/d) for d elements a datagram. Left alone, datagrams are ≈ 4 KiB; primeDumps
// reads one GETGEN reply with a 32 KiB buffer when the socket is opened, which makes every later
// datagram 32 KiB: eight times fewer walks.
//
// # Verify
//
// Verify reads the table back and compares it with the mirror: the table exists; the chain names
// match and base chains have the mirror's hook and priority; each chain has as many rules as the
// mirror and each rule, position by position, has the mirror's userdata (its comment TLV) and its
// expressions: each read-back expression is re-encoded and compared byte for byte with what the
// rule encodes to (counters by kind only; byteorder, which v0.3.0 does not decode, is left out);
// the set names and sizes match; each set's elements match in key, verdict and comment. v0.3.0
// reads elements back without their verdicts, so Verify dumps them itself (readback.go) on a second
// netlink socket with a fixed 64 KiB receive buffer, and compares them in the form the encoder
// produces: a start and an end-flagged element per single-field interval, Key+KeyEnd for
// concatenations, sorted (the kernel returns intervals out of order) and without nft's all-zero end
// sentinel. Verify repairs nothing: the caller calls Replace.
//
// # Monitor: changes by others (monitor.go)
//
// Conn.Monitor subscribes, in the Conn's network namespace, to the kernel's nftables events
// (NETLINK_NETFILTER, group NFNLGRP_NFTABLES); Monitor.Run reports each transaction of another
// netlink socket that touched the table as a TableChange on the caller's channel: the committing
// task's pid and command name (NFT_MSG_NEWGEN's NFTA_GEN_PROC_PID and NFTA_GEN_PROC_NAME) and
// the objects it added or deleted, by kind and chain or set. A transaction's events come after
// the kernel has committed it, one message per object, each naming its table (family inet and
// the table's name; other tables and families are ignored) and carrying in its header the
// committing socket's netlink port id, then NEWGEN with the same port id; the Monitor collects
// them per port and reports them at NEWGEN. The Conn's own batches are recognised by the port id
// of its socket, not by NEWGEN's pid, which is the id of the committing thread in the initial PID
// namespace (a Go process commits from any of its threads; in a container that pid is not even
// visible). A socket filter (classic BPF on the first header's nlmsg_pid) drops the datagrams of
// the Conn's own transactions before they are queued; it follows the Conn when it re-dials (the
// port is an atomic the Monitor reads).
//
// Cost: while any socket listens to the group, the kernel builds an event per object of every
// transaction in the committing thread, filtered or not: ≈ 2 µs of system time per element. So a
// batch of 16 KiB or more (≈ 250 elements with comments) is sent with the Conn's Monitors out of
// the group (a quiet batch, Conn.sendWatched), and the ruleset generation, which every transaction
// advances by one, is read before they leave and after they join again: any other difference than
// the batch's own is reported as Lost. BenchmarkReplaceWatched times a Replace of 100,000
// elements with no listener, with the Conn's Monitor and with a socket listening throughout
// (BENCHMARKS.md has the figures).
//
// Invariants: every change by another socket that is committed while the Monitor runs is either
// reported or covered by a later report (a Lost one included). Reports go to the channel without
// blocking; a report that finds it full is dropped, because the report already queued was made
// after the dropped one's transaction committed, so a read-back started on it sees that change
// too. When the socket's queue overflows, the kernel reports ENOBUFS once and drops events until
// the queue is empty: the Monitor reads the queue empty, doubles its buffer, and only then
// reports Lost, so that a read-back started on that report sees every change whose events were
// dropped. If a Monitor cannot rejoin the group after a quiet batch, its Run fails. The Monitor
// repairs nothing: the agent answers a reported change with a Replace, a Lost report with Verify
// and a Replace on drift.
//
// google/nftables v0.3.0 has a Monitor, but it drops the table and set of element events (an
// element change cannot be attributed to a table), decodes every rule and element of every
// table, blocks its reader on an unbuffered channel, and stops at the first receive error,
// ENOBUFS included; hence this one, on mdlayher/netlink directly.
//
// # google/nftables v0.3.0 workarounds
//
//   - Chain comments: v0.3.0's Chain has no userdata. addChainComment appends
//     NFTA_CHAIN_USERDATA to the NEWCHAIN message AddChain has just queued, reaching the Conn's
//     unexported message queue by reflection; if that layout ever changes the batch fails with an
//     error saying so, it never corrupts anything.
//   - Set IDs are assigned per batch (v0.3.0's own counter is an unsynchronised global).
//   - ifname sets carry the host byte-order userdata, or nft lists their elements as "".
//   - `meta l4proto . th dport` is transcribed from nft 1.0.6's bytecode: meta l4proto into
//     register 1, byteorder hton (size 2, len 1), th dport into register 9 (the next 32-bit
//     register); the concatenated key pads each field to 4 bytes. ipv4/ipv6 payload loads are
//     guarded by `meta nfproto` (the inet family), ct state is ct + bitwise + cmp neq 0, an iifname
//     prefix ("veth*") compares the prefix bytes only, an exact name all 16 bytes. `meta mark &
//     M == M` is meta + bitwise + cmp eq M; `meta mark set meta mark | M` (& ^M) is meta load,
//     bitwise (mask ^M, xor M; mask ^M, xor 0) and meta set; `notrack` its own expression.
//   - Single-field interval sets take a start element and an end element at the address after the
//     range (flagged IntervalEnd, omitted at the end of the address space), as nft sends them.
//   - Deletes send keys only (no verdict, no comment).
//   - Handles are not needed: chains are flushed and refilled, never edited rule by rule.
//
// Counters reads, per chain of the mirror that has counting rules, the sum of its rules' counters
// (internal/nft exposes denied packets per policy from the deny chains).
package ruleset
