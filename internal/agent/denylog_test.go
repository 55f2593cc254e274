package agent

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestPodIndex: the index names the pod of each address through adds, address changes and
// deletes; of two pods listing one address, the later update's.
func TestPodIndex(t *testing.T) {
	ep := func(name string, addrs ...string) model.Update {
		e := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: name}}
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
		{[]model.Update{ep("a", "10.0.0.1", "fd00::1"), ep("b", "10.0.0.2")},
			map[string]string{"10.0.0.1": "a", "fd00::1": "a", "10.0.0.2": "b", "10.0.0.3": ""}},
		{[]model.Update{ep("a", "10.0.0.3")}, map[string]string{"10.0.0.1": "", "fd00::1": "", "10.0.0.3": "a"}},
		{[]model.Update{ep("c", "10.0.0.2")}, map[string]string{"10.0.0.2": "c"}},
		{[]model.Update{del("b")}, map[string]string{"10.0.0.2": "c"}},
		{[]model.Update{del("c"), del("a")}, map[string]string{"10.0.0.2": "", "10.0.0.3": ""}},
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
