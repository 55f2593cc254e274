package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestPodIndex: the index names the pod of each address through adds, address changes and
// deletes; of several pods listing one address, the owner by the model's rule: a running pod
// before one that does not run, then the newer, then the smaller key, whatever the order of
// updates.
func TestPodIndex(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ep := func(name string, running bool, createdMin int, addrs ...string) model.Update {
		e := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: name}, Running: running,
			Created: t0.Add(time.Duration(createdMin) * time.Minute)}
		for _, a := range addrs {
			e.Addrs = append(e.Addrs, netip.MustParseAddr(a))
		}
		return model.EndpointSet{Endpoint: e}
	}
	del := func(name string) model.Update {
		return model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: name}}
	}
	ix := newPodIndex()
	for _, step := range []struct {
		updates []model.Update
		want    map[string]string // address → pod name, "" for none
	}{
		{[]model.Update{ep("a", true, 0, "10.0.0.1", "fd00::1"), ep("b", true, 0, "10.0.0.2")},
			map[string]string{"10.0.0.1": "a", "fd00::1": "a", "10.0.0.2": "b", "10.0.0.3": ""}},
		{[]model.Update{ep("a", true, 0, "10.0.0.3")}, map[string]string{"10.0.0.1": "", "fd00::1": "", "10.0.0.3": "a"}},
		{[]model.Update{ep("c", false, 5, "10.0.0.2")}, map[string]string{"10.0.0.2": "b"}}, // running first
		{[]model.Update{ep("c", true, 5, "10.0.0.2")}, map[string]string{"10.0.0.2": "c"}},  // then the newer
		{[]model.Update{ep("b", true, 0, "10.0.0.2")}, map[string]string{"10.0.0.2": "c"}},  // not the later update
		{[]model.Update{del("c")}, map[string]string{"10.0.0.2": "b"}},
		{[]model.Update{ep("d", true, 0, "10.0.0.2")}, map[string]string{"10.0.0.2": "b"}}, // then the smaller key
		{[]model.Update{del("b")}, map[string]string{"10.0.0.2": "d"}},
		{[]model.Update{del("d"), del("a")}, map[string]string{"10.0.0.2": "", "10.0.0.3": ""}},
	} {
		ix.observe(step.updates)
		for a, want := range step.want {
			k, ok := ix.pod(netip.MustParseAddr(a))
			if got := k.Name; got != want || ok != (want != "") {
				t.Errorf("after %v: %s is pod %q (%v), want %q", step.updates, a, got, ok, want)
			}
		}
	}
}
