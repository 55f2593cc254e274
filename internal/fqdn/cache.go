package fqdn

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Limits bounds the Cache and sets the elements' timeouts (see the package comment).
type Limits struct {
	// PerName is the most addresses one pattern holds.
	PerName int
	// PerClient is the most elements, over all patterns, one client's answers hold.
	PerClient int
	// Floor is the shortest TTL an answer is given; MaxTTL the longest.
	Floor, MaxTTL time.Duration
	// Grace is added to every timeout.
	Grace time.Duration
}

// DefaultLimits are the agent's limits unless configured otherwise.
var DefaultLimits = Limits{PerName: 256, PerClient: 1024, Floor: 5 * time.Second, MaxTTL: time.Hour, Grace: 10 * time.Second}

// Timeout is how long an element answered with ttl lives: clamp(ttl, Floor, MaxTTL) + Grace.
func (l Limits) Timeout(ttl time.Duration) time.Duration {
	return min(max(ttl, l.Floor), l.MaxTTL) + l.Grace
}

// Change is one element the kernel's set of a pattern gains (with Timeout) or loses (Delete).
// An Add for an address the set holds replaces its timeout.
type Change struct {
	Pattern string
	Addr    netip.Addr
	Timeout time.Duration
	Delete  bool
}

// Entry is one cached address of a pattern with the time it has left.
type Entry struct {
	Addr      netip.Addr
	Remaining time.Duration
}

// Evictions counts the elements evicted because a bound was reached.
type Evictions struct {
	// PerName counts evictions from a full pattern; PerClient from a client at its bound.
	PerName, PerClient uint64
}

// Cache holds, for each pattern, the addresses answered for it and when each expires.
type Cache struct {
	limits Limits
	// exact and wildcard index the patterns by their name (wildcard: the suffix after "*.").
	exact, wildcard map[string]*nameSet
	// clients holds each client's elements.
	clients   map[netip.Addr]map[elemKey]struct{}
	evictions Evictions
}

type nameSet struct {
	pattern Pattern
	elems   map[netip.Addr]*element
}

type element struct {
	expires time.Time
	client  netip.Addr
}

type elemKey struct {
	set  *nameSet
	addr netip.Addr
}

// NewCache returns an empty Cache; it panics on a PerName or PerClient below one.
func NewCache(l Limits) *Cache {
	if l.PerName < 1 || l.PerClient < 1 {
		panic(fmt.Sprintf("fqdn.NewCache: limits %+v", l))
	}
	return &Cache{limits: l, exact: map[string]*nameSet{}, wildcard: map[string]*nameSet{}, clients: map[netip.Addr]map[elemKey]struct{}{}}
}

// Limits are the Cache's limits.
func (c *Cache) Limits() Limits { return c.limits }

// SetPatterns makes patterns the Cache's patterns: those that stay keep their elements, those
// that go drop theirs (their kernel sets go with the rules that use them), new ones start empty.
func (c *Cache) SetPatterns(patterns []Pattern) {
	keep := map[Pattern]bool{}
	for _, p := range patterns {
		keep[p] = true
		idx := c.index(p)
		if idx[p.name] == nil {
			idx[p.name] = &nameSet{pattern: p, elems: map[netip.Addr]*element{}}
		}
	}
	for _, idx := range []map[string]*nameSet{c.exact, c.wildcard} {
		for name, s := range idx {
			if keep[s.pattern] {
				continue
			}
			for addr, e := range s.elems {
				c.unown(e.client, elemKey{s, addr})
			}
			delete(idx, name)
		}
	}
}

func (c *Cache) index(p Pattern) map[string]*nameSet {
	if p.wildcard {
		return c.wildcard
	}
	return c.exact
}

// Patterns lists the Cache's patterns, sorted.
func (c *Cache) Patterns() []Pattern {
	var ps []Pattern
	for _, idx := range []map[string]*nameSet{c.exact, c.wildcard} {
		for _, s := range idx {
			ps = append(ps, s.pattern)
		}
	}
	slices.SortFunc(ps, func(a, b Pattern) int { return strings.Compare(a.String(), b.String()) })
	return ps
}

// matching appends the sets whose pattern matches the canonical name.
func (c *Cache) matching(sets []*nameSet, name string) []*nameSet {
	if s := c.exact[name]; s != nil {
		sets = append(sets, s)
	}
	for i := strings.IndexByte(name, '.'); i >= 0; {
		suffix := name[i+1:]
		if s := c.wildcard[suffix]; s != nil && i > 0 {
			sets = append(sets, s)
		}
		j := strings.IndexByte(suffix, '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return sets
}

// Observe records answer a, received by client at now, and returns what the kernel's sets must
// change: an Add for each element it creates or extends, a Delete for each it evicts.
func (c *Cache) Observe(client netip.Addr, a Answer, now time.Time) []Change {
	c.expire(client, now)
	// owners[i] are the sets matched by a name of the chain up to Chain[i].
	owners := make([][]*nameSet, len(a.Chain))
	var acc []*nameSet
	for i, name := range a.Chain {
		acc = c.matching(acc, name)
		owners[i] = slices.Clip(acc)
	}
	var changes []Change
	for _, r := range a.Records {
		timeout := c.limits.Timeout(r.TTL)
		expires := now.Add(timeout)
		for _, s := range owners[r.Owner] {
			e := s.elems[r.Addr]
			if e != nil && !e.expires.Before(expires) {
				continue
			}
			if e == nil {
				changes = c.roomInSet(changes, s, now)
				changes = c.roomForClient(changes, client)
				e = &element{}
				s.elems[r.Addr] = e
			} else if e.client != client {
				c.unown(e.client, elemKey{s, r.Addr})
				changes = c.roomForClient(changes, client)
			}
			e.expires, e.client = expires, client
			c.own(client, elemKey{s, r.Addr}) // a no-op for an element client owned already
			changes = append(changes, Change{Pattern: s.pattern.String(), Addr: r.Addr, Timeout: timeout})
		}
	}
	return changes
}

// roomInSet evicts from s, while it is full, the element that expires first (after dropping the
// expired ones), so that one more fits.
func (c *Cache) roomInSet(changes []Change, s *nameSet, now time.Time) []Change {
	if len(s.elems) >= c.limits.PerName {
		for addr, e := range s.elems {
			if !e.expires.After(now) {
				c.unown(e.client, elemKey{s, addr})
				delete(s.elems, addr)
			}
		}
	}
	for len(s.elems) >= c.limits.PerName {
		changes = c.evict(changes, s, firstToExpire(s))
		c.evictions.PerName++
	}
	return changes
}

// roomForClient evicts, while client holds its bound, the element of client's that expires
// first (among equals, the smallest address, then pattern, as firstToExpire), so that it may
// own one more (its expired ones Observe has dropped).
func (c *Cache) roomForClient(changes []Change, client netip.Addr) []Change {
	for len(c.clients[client]) >= c.limits.PerClient {
		var first elemKey
		var at time.Time
		for k := range c.clients[client] {
			e := k.set.elems[k.addr]
			if first.set == nil || e.expires.Before(at) || e.expires.Equal(at) && (k.addr.Less(first.addr) ||
				k.addr == first.addr && k.set.pattern.String() < first.set.pattern.String()) {
				first, at = k, e.expires
			}
		}
		changes = c.evict(changes, first.set, first.addr)
		c.evictions.PerClient++
	}
	return changes
}

func firstToExpire(s *nameSet) netip.Addr {
	var first netip.Addr
	var at time.Time
	for addr, e := range s.elems {
		if !first.IsValid() || e.expires.Before(at) || e.expires.Equal(at) && addr.Less(first) {
			first, at = addr, e.expires
		}
	}
	return first
}

func (c *Cache) evict(changes []Change, s *nameSet, addr netip.Addr) []Change {
	c.unown(s.elems[addr].client, elemKey{s, addr})
	delete(s.elems, addr)
	return append(changes, Change{Pattern: s.pattern.String(), Addr: addr, Delete: true})
}

func (c *Cache) own(client netip.Addr, k elemKey) {
	m := c.clients[client]
	if m == nil {
		m = map[elemKey]struct{}{}
		c.clients[client] = m
	}
	m[k] = struct{}{}
}

func (c *Cache) unown(client netip.Addr, k elemKey) {
	m := c.clients[client]
	delete(m, k)
	if len(m) == 0 {
		delete(c.clients, client)
	}
}

// expire drops client's elements that have expired at now (the kernel has dropped them too).
func (c *Cache) expire(client netip.Addr, now time.Time) {
	for k := range c.clients[client] {
		if !k.set.elems[k.addr].expires.After(now) {
			delete(k.set.elems, k.addr)
			c.unown(client, k)
		}
	}
}

// Expire drops every element that has expired at now. The kernel expires its elements on its
// own; Expire only keeps the Cache's bounds and Entries true, at a cost proportional to the
// elements held.
func (c *Cache) Expire(now time.Time) {
	for client := range c.clients {
		c.expire(client, now)
	}
}

// Entries lists the unexpired addresses of the pattern (as String writes it) with the time each
// has left at now, by address; nil for a pattern the Cache does not have.
func (c *Cache) Entries(pattern string, now time.Time) []Entry {
	p, err := ParsePattern(pattern)
	if err != nil {
		return nil
	}
	s := c.index(p)[p.name]
	if s == nil {
		return nil
	}
	var es []Entry
	for addr, e := range s.elems {
		if left := e.expires.Sub(now); left > 0 {
			es = append(es, Entry{Addr: addr, Remaining: left})
		}
	}
	slices.SortFunc(es, func(a, b Entry) int { return a.Addr.Compare(b.Addr) })
	return es
}

// Len is the number of elements held (expired ones until Expire drops them).
func (c *Cache) Len() int {
	n := 0
	for _, m := range c.clients {
		n += len(m)
	}
	return n
}

// Evictions returns the evictions counted since the Cache was made.
func (c *Cache) Evictions() Evictions { return c.evictions }
