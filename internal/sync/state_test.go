package sync_test

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// state is the model state that a stream of updates builds (what the graph would hold).
type state struct {
	Namespaces map[string]model.Namespace
	Endpoints  map[model.EndpointKey]model.Endpoint
	Policies   map[model.PolicyKey]model.Policy
	// Calico's tiers and network sets, and service accounts
	Tiers           map[string]model.Tier
	NetworkSets     map[model.NetworkSetKey]model.NetworkSet
	ServiceAccounts map[[2]string]model.ServiceAccount
	InSync          bool
}

func newState() state {
	return state{Namespaces: map[string]model.Namespace{}, Endpoints: map[model.EndpointKey]model.Endpoint{},
		Policies: map[model.PolicyKey]model.Policy{}, Tiers: map[string]model.Tier{},
		NetworkSets: map[model.NetworkSetKey]model.NetworkSet{}, ServiceAccounts: map[[2]string]model.ServiceAccount{}}
}

func (s state) clone() state {
	return state{Namespaces: maps.Clone(s.Namespaces), Endpoints: maps.Clone(s.Endpoints),
		Policies: maps.Clone(s.Policies), Tiers: maps.Clone(s.Tiers), NetworkSets: maps.Clone(s.NetworkSets),
		ServiceAccounts: maps.Clone(s.ServiceAccounts), InSync: s.InSync}
}

func (s *state) apply(u model.Update) {
	switch u := u.(type) {
	case model.NamespaceSet:
		s.Namespaces[u.Namespace.Name] = u.Namespace
	case model.NamespaceDeleted:
		delete(s.Namespaces, u.Name)
	case model.EndpointSet:
		s.Endpoints[u.Endpoint.Key] = u.Endpoint
	case model.EndpointDeleted:
		delete(s.Endpoints, u.Key)
	case model.PolicySet:
		s.Policies[u.Policy.Key] = u.Policy
	case model.PolicyDeleted:
		delete(s.Policies, u.Key)
	case model.TierSet:
		s.Tiers[u.Tier.Name] = u.Tier
	case model.TierDeleted:
		delete(s.Tiers, u.Name)
	case model.NetworkSetSet:
		s.NetworkSets[u.NetworkSet.Key] = u.NetworkSet
	case model.NetworkSetDeleted:
		delete(s.NetworkSets, u.Key)
	case model.ServiceAccountSet:
		s.ServiceAccounts[[2]string{u.ServiceAccount.Namespace, u.ServiceAccount.Name}] = u.ServiceAccount
	case model.ServiceAccountDeleted:
		delete(s.ServiceAccounts, [2]string{u.Namespace, u.Name})
	case model.SyncStatusUpdate:
		if u.Status == model.InSync {
			s.InSync = true
		}
	}
}

// only keeps the objects of the given namespaces (the API server has its own namespaces).
func (s state) only(namespaces ...string) state {
	out := newState()
	out.InSync = s.InSync
	for _, ns := range namespaces {
		if n, ok := s.Namespaces[ns]; ok {
			out.Namespaces[ns] = n
		}
	}
	for k, e := range s.Endpoints {
		for _, ns := range namespaces {
			if k.Namespace == ns {
				out.Endpoints[k] = e
			}
		}
	}
	for k, p := range s.Policies {
		for _, ns := range namespaces {
			if k.Namespace == ns {
				out.Policies[k] = p
			}
		}
	}
	return out
}

func (s state) String() string {
	var lines []string
	for _, n := range s.Namespaces {
		lines = append(lines, fmt.Sprintf("ns %s %v", n.Name, n.Labels))
	}
	for _, e := range s.Endpoints {
		host := ""
		if e.Host != nil {
			host = fmt.Sprintf(" host %+v", *e.Host)
			e.Host = nil
		}
		lines = append(lines, fmt.Sprintf("ep %+v%s", e, host))
	}
	for _, p := range s.Policies {
		lines = append(lines, fmt.Sprintf("pol %+v", p))
	}
	for _, t := range s.Tiers {
		lines = append(lines, fmt.Sprintf("tier %+v", t))
	}
	for _, n := range s.NetworkSets {
		lines = append(lines, fmt.Sprintf("netset %s %v %v", n.Key, n.Labels, n.Nets))
	}
	for _, a := range s.ServiceAccounts {
		lines = append(lines, fmt.Sprintf("sa %+v", a))
	}
	sort.Strings(lines)
	return fmt.Sprintf("in-sync=%v\n  %s", s.InSync, strings.Join(lines, "\n  "))
}

// collector runs a Watcher and folds its stream into a state.
type versionAt struct {
	rv string
	st state
}

type collector struct {
	mu     gosync.Mutex
	st     state
	log    []model.Update
	atSync *state // the state when in-sync arrived
	// firstBatch is the first batch received.
	firstBatch []model.Update
	// versions are the SourceVersions received (kept out of log), each with the state when it
	// arrived
	versions map[string]versionAt
	changed  chan struct{}
	done     chan error
}

func startCollector(t *testing.T, w *sync.Watcher) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{st: newState(), versions: map[string]versionAt{}, changed: make(chan struct{}, 1), done: make(chan error, 1)}
	out := make(chan []model.Update)
	go func() { c.done <- w.Run(ctx, out) }()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case batch := <-out:
				c.mu.Lock()
				if c.firstBatch == nil {
					c.firstBatch = batch
				}
				for _, u := range batch {
					if v, ok := u.(model.SourceVersion); ok {
						c.versions[v.Resource] = versionAt{v.ResourceVersion, c.st.clone()}
						continue
					}
					c.st.apply(u)
					c.log = append(c.log, u)
					if s, ok := u.(model.SyncStatusUpdate); ok && s.Status == model.InSync && c.atSync == nil {
						snap := c.st.clone()
						c.atSync = &snap
					}
				}
				c.mu.Unlock()
				select {
				case c.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return c
}

// waitVersion waits until the watcher vouches for resourceVersion rv (or a newer one) of
// resource, and returns the state delivered when it did.
func (c *collector) waitVersion(t *testing.T, resource, rv string) state {
	t.Helper()
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		at, ok := c.versions[resource]
		c.mu.Unlock()
		if got, err := strconv.ParseUint(at.rv, 10, 64); ok && err == nil && got >= want {
			return at.st
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("no SourceVersion of %s at or after %s (last %q)", resource, rv, at.rv)
		}
	}
}

// mark returns the position in the update log, for since.
func (c *collector) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.log)
}

// since returns the updates received after mark.
func (c *collector) since(mark int) []model.Update {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]model.Update(nil), c.log[mark:]...)
}

// waitFor waits until the state (restricted by view) equals want. The timeout only bounds a
// failing test.
func (c *collector) waitFor(t *testing.T, step string, view func(state) state, want state) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		got := view(c.st.clone()) // the collector keeps writing its maps
		c.mu.Unlock()
		if equalState(got, want) {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("%s: the update stream did not reach the expected state\n got %v\nwant %v", step, got, want)
		}
	}
}

// waitSync waits for in-sync and returns the state at that moment.
func (c *collector) waitSync(t *testing.T) state {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		at := c.atSync
		c.mu.Unlock()
		if at != nil {
			return *at
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatal("no in-sync")
		}
	}
}
