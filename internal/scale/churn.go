package scale

import (
	"fmt"
	"iter"
	"math/rand/v2"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// ChangeKind is what one PodChange does.
type ChangeKind int

const (
	// PodCreated: a new pod, scheduled and running, with addresses no other pod has held.
	PodCreated ChangeKind = iota
	// PodDeleted: a pod that exists (generated or created earlier in the stream) goes.
	PodDeleted
	// PodRelabelled: a pod that exists gets another "app" label.
	PodRelabelled
)

func (k ChangeKind) String() string {
	switch k {
	case PodCreated:
		return "create"
	case PodDeleted:
		return "delete"
	case PodRelabelled:
		return "relabel"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// PodChange is one change of a Churn stream.
type PodChange struct {
	Kind ChangeKind
	// Pod is the pod after the change (created, relabelled) or as it was (deleted).
	Pod model.Endpoint
	// Before is the relabelled pod as it was; zero for the other kinds.
	Before model.Endpoint
}

// Churn is the stream of pod changes of a busy cluster over the cluster Generate(Cluster) makes:
// creates, deletes and label changes in the proportion 2 : 2 : 1, so that the number of pods
// stays about Cluster.Pods. A created pod is shaped as Generate's pod of the next index (its
// namespace, app and tier labels, named ports, addresses from PodAddrs) on a random other node
// or, with probability Local, on Cluster.Node; a delete or relabel picks a pod that exists then,
// on Cluster.Node with probability Local (when it has one) and elsewhere otherwise. A relabel
// sets "app" to another of the namespace's apps.
type Churn struct {
	Cluster Spec
	Local   float64
	Seed    int64
}

// Changes yields the stream, without end; the same Churn yields the same changes. It holds
// every pod of the cluster (the state a delete or relabel picks from).
func (c Churn) Changes() iter.Seq[PodChange] {
	return func(yield func(PodChange) bool) {
		s := c.Cluster.withDefaults()
		nodeOf := placement(s, rand.New(rand.NewPCG(uint64(s.Seed), 0x5ca1ab1e))) // as Updates draws it
		var local, remote []model.Endpoint
		remoteNodes := int32(1)
		for i, n := range nodeOf {
			e := pod(s, i, nodeName(s, n))
			if n < 0 {
				local = append(local, e)
			} else {
				remote = append(remote, e)
				remoteNodes = max(remoteNodes, n)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(c.Seed), 0xc4a5))
		// pick returns the list and the index of a random pod, local with probability Local
		pick := func() (*[]model.Endpoint, int) {
			from := &remote
			if len(local) > 0 && (rng.Float64() < c.Local || len(remote) == 0) {
				from = &local
			}
			return from, rng.IntN(len(*from))
		}
		for next := s.Pods; ; {
			var ch PodChange
			switch k := rng.IntN(5); {
			case k < 2 || len(local)+len(remote) == 0:
				node := nodeName(s, 1+rng.Int32N(remoteNodes))
				if rng.Float64() < c.Local {
					node = s.Node
				}
				ch = PodChange{Kind: PodCreated, Pod: pod(s, next, node)}
				next++
				if node == s.Node {
					local = append(local, ch.Pod)
				} else {
					remote = append(remote, ch.Pod)
				}
			case k < 4:
				from, i := pick()
				ch = PodChange{Kind: PodDeleted, Pod: (*from)[i]}
				last := len(*from) - 1
				(*from)[i] = (*from)[last]
				*from = (*from)[:last]
			default:
				from, i := pick()
				before := (*from)[i]
				labels := before.Labels.Map()
				app := labels["app"]
				for labels["app"] == app {
					labels["app"] = fmt.Sprintf("app-%d", rng.IntN(appsPerNamespace))
				}
				after := before
				after.Labels = model.LabelsOf(labels)
				(*from)[i] = after
				ch = PodChange{Kind: PodRelabelled, Pod: after, Before: before}
			}
			if !yield(ch) {
				return
			}
		}
	}
}
