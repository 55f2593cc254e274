package bench_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// BenchmarkColdStartAPI is P3 and P4: the agent (the product binary, cmd/nftpolicy, as
// agentColdStart runs it) starting against a real API server that holds P3's cluster — time from
// start to its first full commit, the transactions it took, and its peak RSS then. Creating 100,000
// pods through the API takes minutes here (≈ 240/s), so the objects are written straight into the
// API server's etcd, as the API server stores them (JSON is read back like its own protobuf), and
// the API server serves them from there. Its own etcd and API server: P2's objects would be listed
// too. Not run with BENCH_QUICK.
func BenchmarkColdStartAPI(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	desc := fmt.Sprintf("%d pods, %d policies, %d local pods", coldSpec.Pods, coldSpec.Policies, coldSpec.LocalPods)
	if quick {
		report.add(row{"P3", "cold start of the agent through the API server (" + desc + ")", "not run with BENCH_QUICK=1", "≤ 1 s", ""})
		return
	}
	setStage("P3 cold start through the API server")
	ctx := b.Context()
	srv, loaded := startLoaded(b, coldSpec)

	bin, err := agentproc.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	listAlone, listPlain := serverListTime(b, srv, true), serverListTime(b, srv, false)
	// The API server holds ≈ 0.74 GB, and each list of every pod allocates ≈ 0.7 GB in it:
	// whether its collector runs during the agent's list, on the two cores the agent shares with
	// it, changes from run to run (≈ 0.5–0.9 s more when it does). The measured start begins
	// with that collection done, as waitQuiet lets this process's and the machine's settle; the
	// start after it, which meets the API server's next collection, is printed beside it.
	if err := srv.CollectGarbage(ctx); err != nil {
		b.Fatal(err)
	}
	waitQuiet(b)
	res, collected := agentColdStart(b, srv, bin, newNetns(b, "bp").name, agentProfiles{})
	waitQuiet(b)
	unsettled, collectedUnsettled := agentColdStart(b, srv, bin, newNetns(b, "bq").name, agentProfiles{})
	if err := srv.CollectGarbage(ctx); err != nil {
		b.Fatal(err)
	}
	waitQuiet(b)
	plain, _ := agentColdStart(b, srv, bin, newNetns(b, "bg").name, agentProfiles{}, "--api-compression=false")
	if prof := (agentProfiles{os.Getenv("NFTP_BENCH_AGENT_CPUPROFILE"), os.Getenv("NFTP_BENCH_AGENT_HEAPPROFILE")}); prof != (agentProfiles{}) {
		// the product takes no profiles: the same agent built with the tag nftpolicy_profile does
		pbin, err := agentproc.Build(b.TempDir(), "nftpolicy_profile")
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.CollectGarbage(ctx); err != nil {
			b.Fatal(err)
		}
		waitQuiet(b)
		pr, _ := agentColdStart(b, srv, pbin, newNetns(b, "br").name, prof)
		b.Logf("profiled agent: first commit %v, peak RSS %d MiB, CPU %v", pr.FirstCommit, pr.PeakRSS>>20, pr.CPU)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(res.FirstCommit.Seconds()*1e3, "ms/agent-cold-start")
	b.ReportMetric(float64(res.PeakRSS)/mib, "agent-peak-RSS-MiB")
	b.ReportMetric(res.CPU.Seconds(), "agent-CPU-s")
	report.add(row{"P3", "cold start of the agent (cmd/nftpolicy) through the API server (" + desc + "): process start → first full commit",
		fmt.Sprintf("%.2f s (in sync, every initial list received, after %.2f s; the first commit's build and transaction %.2f s), %d transaction(s), %d elements; the agent used %.2f s of CPU, the API server and etcd %.2f s, and the API server collected %d time(s) meanwhile (objects loaded into etcd in %.0f s)",
			res.FirstCommit.Seconds(), res.InSync.Seconds(), res.Apply.Seconds(), res.Transactions, res.Elements, res.CPU.Seconds(), res.APICPU.Seconds(), collected, loaded.Seconds()),
		"≤ 1 s, 1 transaction", meets(res.FirstCommit <= time.Second && res.Transactions == 1)})
	report.add(row{"P3", "the same start right after it, whose list left ≈ 0.7 GB of garbage in the API server",
		fmt.Sprintf("%.2f s, peak RSS %.0f MiB; the agent used %.2f s of CPU, the API server and etcd %.2f s, and the API server collected %d time(s) meanwhile",
			unsettled.FirstCommit.Seconds(), float64(unsettled.PeakRSS)/mib, unsettled.CPU.Seconds(), unsettled.APICPU.Seconds(), collectedUnsettled), "", ""})
	report.add(row{"P3", "the first start again with --api-compression=false: the initial lists sent plain",
		fmt.Sprintf("%.2f s (in sync after %.2f s), peak RSS %.0f MiB; the agent used %.2f s of CPU, the API server and etcd %.2f s",
			plain.FirstCommit.Seconds(), plain.InSync.Seconds(), float64(plain.PeakRSS)/mib, plain.CPU.Seconds(), plain.APICPU.Seconds()), "", ""})
	report.add(row{"P3", "the API server's answer to the agent's first pod list alone (protobuf, read as sent and discarded)",
		fmt.Sprintf("%.2f s (%.1f MB) gzipped, as the agent asks for it; plain, as with --api-compression=false, %.2f s (%.0f MB)",
			listAlone.took.Seconds(), float64(listAlone.bytes)/1e6, listPlain.took.Seconds(), float64(listPlain.bytes)/1e6), "", ""})
	report.add(row{"P4", "peak RSS of that agent process (the product binary) at its first full commit: VmHWM",
		fmt.Sprintf("%.0f MiB (Go heap in use %.0f MiB, the binary's resident pages %.0f MiB)",
			float64(res.PeakRSS)/mib, float64(res.HeapInUse)/mib, float64(res.FilePages)/mib),
		"≤ 100 MiB", meets(res.PeakRSS <= 100*mib)})
}

// startLoaded starts an API server of its own for b (startProfiled), holding spec's cluster
// (loadCluster), and returns it with the time the load took.
func startLoaded(b *testing.B, spec scale.Spec) (*kube.Server, time.Duration) {
	srv := startProfiled(b)
	t0 := time.Now()
	loadCluster(b, srv, spec)
	return srv, time.Since(t0)
}

// startProfiled starts an API server of its own for b with its profiling endpoints, so that a
// measurement can start after its collection (Server.CollectGarbage) and count the collections
// that fall inside it (Server.Collections).
func startProfiled(b *testing.B) *kube.Server {
	srv, err := kube.Start(b.Context(), kube.Config{Profiling: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// loadCluster writes spec's namespaces, pods and policies into the API server's etcd, restarts
// the API server over it and waits until it lists every pod. The restart leaves the API server
// as it is in a cluster that has run for a while: its watch cache filled by one list of etcd,
// not holding the burst of 100,000 just-written pods as events (which it keeps until newer
// events push them out) — 0.2 GB less heap for it to collect, on the cores the agent shares.
func loadCluster(b *testing.B, srv *kube.Server, spec scale.Spec) {
	var kvs []etcdKV
	put := func(key string, obj any) {
		v, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		kvs = append(kvs, etcdKV{key, v})
	}
	created := metav1.NewTime(time.Now().Truncate(time.Second))
	meta := func(ns, name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, CreationTimestamp: created,
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", len(kvs)))}
	}
	pods := 0
	for u := range scale.Updates(spec) {
		switch u := u.(type) {
		case model.NamespaceSet:
			n := u.Namespace
			put("/registry/namespaces/"+n.Name, &corev1.Namespace{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: meta("", n.Name, n.Labels),
				Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			})
		case model.EndpointSet:
			put("/registry/pods/"+u.Endpoint.Key.Namespace+"/"+u.Endpoint.Key.Name, podObject(u.Endpoint, meta))
			pods++
		case model.PolicySet:
			p := networkPolicy(u.Policy)
			p.ObjectMeta = meta(u.Policy.Namespace, u.Policy.Key.Name, nil)
			put("/registry/networkpolicies/"+u.Policy.Namespace+"/"+u.Policy.Key.Name, p)
		}
	}
	if err := etcdPut(b.Context(), srv.EtcdURL, kvs); err != nil {
		b.Fatal(err)
	}
	if err := srv.RestartAPIServer(b.Context(), 0); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// resourceVersion 0: from the API server's watch cache, which follows etcd
		l, err := srv.Client.CoreV1().Pods("").List(b.Context(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Items) == pods {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the API server lists %d pods of the %d written into etcd", len(l.Items), pods)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type listTiming struct {
	took  time.Duration
	bytes int64
}

// serverListTime times the request the agent's pod informer starts with — every pod at
// resourceVersion 0, in protobuf, gzipped as the agent asks for it by default, or plain as with
// --api-compression=false — with its answer read as sent and thrown away: the part of the
// agent's cold start that is the API server's (best of two), and the bytes it sends.
func serverListTime(b *testing.B, srv *kube.Server, gzipped bool) listTiming {
	cfg := rest.CopyConfig(srv.Config)
	cfg.DisableCompression = true // gzip asked for below, and then read as sent
	hc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	best := listTiming{took: time.Hour}
	for range 2 {
		t0 := time.Now()
		req := hc.CoreV1().RESTClient().Get().AbsPath("/api/v1/pods").Param("resourceVersion", "0").
			SetHeader("Accept", "application/vnd.kubernetes.protobuf")
		if gzipped {
			req.SetHeader("Accept-Encoding", "gzip")
		}
		body, err := req.Stream(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, body)
		body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if took := time.Since(t0); took < best.took {
			best = listTiming{took, n}
		}
	}
	return best
}

// podObject is a scheduled, running pod as the kubelet would leave it.
func podObject(e model.Endpoint, meta func(ns, name string, labels map[string]string) metav1.ObjectMeta) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: meta(e.Key.Namespace, e.Key.Name, e.Labels.Map()),
		Spec: corev1.PodSpec{NodeName: e.Node, ServiceAccountName: e.ServiceAccount,
			Containers: []corev1.Container{{Name: "c", Image: kube.PauseImage}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, np := range e.NamedPorts {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			corev1.ContainerPort{Name: np.Name, ContainerPort: int32(np.Port), Protocol: corev1.Protocol(strings.ToUpper(np.Protocol.String()))})
	}
	for _, a := range e.Addrs {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: a.String()})
	}
	if len(e.Addrs) > 0 {
		p.Status.PodIP = e.Addrs[0].String()
	}
	return p
}

// networkPolicy writes one of scale's generated policies as the NetworkPolicy it stands for.
func networkPolicy(p model.Policy) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}}
	np.Spec.PodSelector = *labelSelector(p.Selector)
	if p.ApplyIngress {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	if p.ApplyEgress {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	for _, r := range p.IngressRules {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			From: policyPeers(r.Source), Ports: policyPorts(r.Protocol, r.Destination.Ports)})
	}
	for _, r := range p.EgressRules {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: policyPeers(r.Destination), Ports: policyPorts(r.Protocol, r.Destination.Ports)})
	}
	return np
}

func policyPeers(p model.Peer) []networkingv1.NetworkPolicyPeer {
	if len(p.Nets) > 0 {
		b := &networkingv1.IPBlock{CIDR: p.Nets[0].String()}
		for _, n := range p.NotNets {
			b.Except = append(b.Except, n.String())
		}
		return []networkingv1.NetworkPolicyPeer{{IPBlock: b}}
	}
	if p.Selector == "" && p.NamespaceSelector == "" {
		return nil
	}
	return []networkingv1.NetworkPolicyPeer{{PodSelector: labelSelector(p.Selector), NamespaceSelector: labelSelector(p.NamespaceSelector)}}
}

func policyPorts(proto model.Protocol, ps []model.Port) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, pt := range ps {
		prot := corev1.Protocol(strings.ToUpper(proto.String()))
		np := networkingv1.NetworkPolicyPort{Protocol: &prot}
		if pt.Name != "" {
			np.Port = ptr(intstr.FromString(pt.Name))
		} else {
			np.Port = ptr(intstr.FromInt32(int32(pt.First)))
			if pt.Last > pt.First {
				np.EndPort = ptr(int32(pt.Last))
			}
		}
		out = append(out, np)
	}
	return out
}

// labelSelector turns scale's selectors ("all()", or key == 'value' terms joined by &&) into
// matchLabels; "" is nil (no selector).
func labelSelector(s string) *metav1.LabelSelector {
	switch s {
	case "":
		return nil
	case "all()":
		return &metav1.LabelSelector{}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for _, term := range strings.Split(s, " && ") {
		k, v, _ := strings.Cut(term, " == ")
		sel.MatchLabels[k] = strings.Trim(v, "'")
	}
	return sel
}

type etcdKV struct {
	key   string
	value []byte
}

// etcdPut writes kvs through etcd's JSON gateway, 128 puts per transaction (etcd's default
// --max-txn-ops), four transactions in flight.
func etcdPut(ctx context.Context, url string, kvs []etcdKV) error {
	const perTxn = 128
	var next atomic.Int64
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				i := int(next.Add(perTxn)) - perTxn
				if i >= len(kvs) {
					errs <- nil
					return
				}
				var ops []map[string]any
				for _, kv := range kvs[i:min(i+perTxn, len(kvs))] {
					ops = append(ops, map[string]any{"requestPut": map[string]string{
						"key": base64.StdEncoding.EncodeToString([]byte(kv.key)), "value": base64.StdEncoding.EncodeToString(kv.value)}})
				}
				body, _ := json.Marshal(map[string]any{"success": ops})
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/kv/txn", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- fmt.Errorf("etcd txn: %w", err)
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || bytes.Contains(out, []byte(`"error"`)) {
					errs <- fmt.Errorf("etcd txn: %s: %s", resp.Status, out)
					return
				}
			}
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// agentResult is what agentColdStart measures of the agent.
type agentResult struct {
	FirstCommit        time.Duration
	InSync             time.Duration // from the start until every initial list was received (agentColdStart only)
	Apply              time.Duration // the first commit's build and transaction (agentColdStart only)
	Transactions       int
	Elements           int
	PeakRSS, HeapInUse uint64
	FilePages          uint64        // resident pages of the binary (RssFile) at the first commit
	CPU                time.Duration // user + system, until the first commit
	// APICPU is the CPU time etcd and the API server used meanwhile, on the cores the agent
	// shares with them (agentColdStart only)
	APICPU time.Duration
}

// apiCollections is how many times the API server has collected its garbage.
func apiCollections(b *testing.B, srv *kube.Server) int {
	n, err := srv.Collections(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// waitQuiet collects this process's garbage (the objects loaded into etcd, the lists read back)
// and waits, up to 30 s, until the machine's CPUs are at least 90% idle over half a second: the
// API server digests the objects written into etcd for a while, and its collector and this
// process's would otherwise run beside the agent under measurement.
func waitQuiet(b *testing.B) {
	runtime.GC()
	busy := func() (busy, total uint64) {
		text, err := os.ReadFile("/proc/stat")
		if err != nil {
			b.Fatal(err)
		}
		fields := strings.Fields(strings.SplitN(string(text), "\n", 2)[0])[1:]
		for i, f := range fields {
			var v uint64
			fmt.Sscan(f, &v)
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b0, t0 := busy()
		time.Sleep(500 * time.Millisecond)
		b1, t1 := busy()
		if t1 > t0 && float64(b1-b0)/float64(t1-t0) < 0.1 {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("the machine stayed busy (%.0f%% over the last half second): the agent's figures may be slower",
				100*float64(b1-b0)/float64(max(t1-t0, 1)))
			return
		}
	}
}
