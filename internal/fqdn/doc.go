// Package fqdn turns the DNS answers a node's pods receive into the addresses of the domain
// names that ClusterNetworkPolicy domainNames peers allow: it parses answers, matches their
// names against the peers' patterns and keeps, per pattern, the answered addresses with the time
// each stays valid, within fixed bounds.
//
// Place in the data flow: beside the dataplane, on the agent's side, like internal/nflog. The
// agent runs its Observer on the answers the kernel logs; the Observer writes the Changes of
// its Cache into the per-pattern sets that internal/nft declares (dataplane.DomainSetName, the
// names both sides agree on), and the hold's own table (Hold). It imports internal/nflog and
// internal/dataplane only.
//
// Patterns (Pattern) are those of network-policy-api v0.3.0's DomainName: an exact name
// ("kubernetes.io" matches only itself), or "*." and a name, where '*' stands for one or more
// whole labels ("*.kubernetes.io" matches "www.kubernetes.io" and "latest.blog.kubernetes.io",
// not "kubernetes.io"). Names compare case-insensitively (ASCII) and without the trailing dot.
//
// Answers (ParseAnswer) are parsed with golang.org/x/net/dns/dnsmessage. Only a successful
// response to one question of type A or AAAA, class IN, counts. Its CNAME chain is followed
// from the question's name through the answer section (at most MaxChain links, loops ignored);
// every A and AAAA record owned by a name of the chain gives an address, valid for the smallest
// TTL on the chain up to and including its own record. An address belongs to a pattern when any
// name of the chain from the question to the address's owner matches it: a pod that asked for an
// allowed name reaches where the name's CNAMEs lead, and addresses answered for an allowed name
// reached through a CNAME are that name's addresses.
//
// Timeouts: an element lives Limits.Timeout(ttl) = clamp(ttl, Floor, MaxTTL) + Grace. The floor
// keeps a zero or tiny TTL from expiring before the pod connects; the grace period keeps a
// connection opened at the end of the TTL from losing its address while the pod resolves again;
// MaxTTL bounds how long one answer can keep an address allowed. The kernel expires elements by
// their timeout on its own; the Cache holds the same expiry so that it can bound, evict and
// explain without asking the kernel. A later answer that extends an element's expiry re-adds it
// with the longer timeout; one that would shorten it changes nothing.
//
// Bounds: a pattern holds at most Limits.PerName addresses and one client (the pod the answer
// went to) at most Limits.PerClient elements over all patterns; an element is owned by the
// client whose answer last extended it. When a bound is reached the element of the full pattern
// (or client) that expires first is evicted — a Delete Change — and counted (Evictions). The
// Cache's memory is therefore at most patterns × PerName elements, whatever the rate of answers;
// the cost of one answer is O(records × labels) for matching, plus O(PerName + PerClient) per
// eviction. The Cache is not safe for concurrent use: one goroutine owns it.
//
// Observation and the hold (hold.go, holdtable.go, observe.go): the node's forward path, and its
// output path for a resolver on the node's own network (InstallHold), log DNS answers (UDP from
// port 53) to an NFLOG group read whole (AnswerCopyRange); the Observer parses each, feeds
// the Cache and writes its Changes (SetWriter: one batch per answer) before the answer reaches
// the pod. There is no queue statement in this kernel, so the answer is held by dropping it
// after the copy: while HoldSet holds its heartbeat element, an answer of at most HoldMaxLength
// bytes is logged and dropped, and the Observer sends the copy on (Injector: a raw socket, the
// UDP checksum computed afresh) once the elements are committed, or the write failed, or the
// packet was no answer; the output path leaves the Injector's own packets alone (InjectUID).
// The first connection after an answer therefore finds its address in
// the set. Heartbeat refreshes the element every HeartbeatPeriod with HeartbeatTimeout, skips
// while the Observer is stalled, and removes it when it stops: an agent that stops, dies or
// hangs leaves answers held for at most HeartbeatTimeout (the pod's resolver retries), after
// which they pass unheld and unseen — DNS never depends on the agent. A longer answer is
// copied and passes at once, racing its commit. The packet mark is neither read nor written.
//
// DNS over TCP: the hold's chains copy TCP segments from port 53 too, without dropping them (a
// dropped segment would be sent again, and a re-sent one would need its sequence state kept);
// the Observer parses a segment that holds exactly one message behind its 2-byte length, which
// a resolver's answer of a few hundred bytes does, and counts the others (Stats.TCPPartial).
// A TCP answer therefore races its commit: the pod's first SYN to an answered address can reach
// the policy before the element (the commit takes well under a millisecond after the copy is
// read), and is dropped; TCP sends it again after a second. DoT and DoH are not seen.
//
// ReadElements reads a pattern's sets back from the kernel, each address with the time it has
// left: what `nftpolicy explain --node-sets` shows.
//
// A pattern learns only the answers observed while it exists: a pattern added by a new policy
// starts empty and fills as pods resolve again.
package fqdn
