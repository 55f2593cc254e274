package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// DefaultBinary is where `make deps` (hack/build-kube-apiserver.sh) puts kube-apiserver.
// The environment variable NFTPOLICY_KUBE_APISERVER overrides it.
const DefaultBinary = "/var/cache/nftpolicy/kube-apiserver-v1.36.3/kube-apiserver"

// DefaultEtcd is where `make deps` (hack/build-etcd.sh) puts etcd 3.6, the etcd used when
// Config.Etcd is empty: it has the progress notifications (RequestWatchProgress) the API server
// needs to stream lists (WatchList). The environment variable NFTPOLICY_ETCD overrides it.
const DefaultEtcd = "/var/cache/nftpolicy/etcd-v3.6.8/etcd"

// ServiceCIDR is the API server's --service-cluster-ip-range.
const ServiceCIDR = "10.96.0.0/16"

// advertiseAddress is what kube-apiserver publishes as the kubernetes Service's endpoint. It
// binds to 127.0.0.1 only, and a loopback advertise address is rejected; without the flag it
// derives one from the default route and fails on a machine that has none. An address of
// TEST-NET-2 (RFC 5737) that nothing dials keeps it independent of the host's network.
const advertiseAddress = "198.51.100.1"

// Config says where and how to run the pair. The zero value is ready to use.
type Config struct {
	// Dir holds etcd's data, the keys, certificates and the token file. Empty: a new temporary
	// directory, removed by Stop. A given Dir is left in place by Stop; an etcd data directory
	// an earlier run left there is removed by Start (every Start is a fresh cluster).
	Dir string
	// Binary is the kube-apiserver binary; empty: $NFTPOLICY_KUBE_APISERVER or DefaultBinary.
	Binary string
	// Etcd is the etcd binary; empty: $NFTPOLICY_ETCD or DefaultEtcd.
	Etcd string
	// Log receives the output of kube-apiserver and etcd; nil: the file "log" in Dir.
	Log io.Writer
	// ServingIPs are extra addresses the serving certificate is valid for, besides 127.0.0.1
	// and ::1 (for clients that reach the API server through another address).
	ServingIPs []netip.Addr
	// Profiling serves the API server's /debug/pprof (its --profiling): for benchmarks that
	// profile it, or run its collector before a measurement (Server.CollectGarbage).
	Profiling bool
}

// Server is a running etcd and kube-apiserver pair on 127.0.0.1.
type Server struct {
	// URL is the API server's address, https://127.0.0.1:PORT.
	URL string
	// Token is the bearer token of the admin identity (user "admin", group system:masters).
	Token string
	// Config is a client configuration for the admin identity that trusts the serving CA.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Dir holds the pair's files (see Config.Dir).
	Dir string
	// EtcdURL is etcd's client address, http://127.0.0.1:PORT.
	EtcdURL string
	// CAData is the PEM certificate of the CA that signed the serving certificate.
	CAData []byte

	binary, etcdBinary string
	profiling          bool
	apiPort            int
	ownDir             bool
	log                io.Writer
	tail               *tailBuffer
	closeLog           func() error

	mu        sync.Mutex
	etcd, api *process
	stopped   bool
}

// CollectGarbage runs the API server's garbage collector to its end (its /debug/pprof/heap
// with gc=1, the profile discarded); it needs Config.Profiling. A benchmark calls it before a
// measurement so that the API server does not collect a heap of a gigabyte or more, on the
// cores the measured process shares with it, at a moment that changes from run to run.
func (s *Server) CollectGarbage(ctx context.Context) error {
	if !s.profiling {
		return errors.New("kube test environment: collecting the API server's garbage needs Config.Profiling")
	}
	body, err := s.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Stream(ctx)
	if err != nil {
		return fmt.Errorf("kube test environment: the API server's collection: %w", err)
	}
	defer body.Close()
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("kube test environment: the API server's collection: %w", err)
	}
	return nil
}

// Collections returns how many times the API server's garbage collector has run
// (go_gc_duration_seconds_count in its metrics).
func (s *Server) Collections(ctx context.Context) (int, error) {
	raw, err := s.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("kube test environment: the API server's metrics: %w", err)
	}
	n, ok := testenv.MetricValue(string(raw), "go_gc_duration_seconds_count")
	if !ok {
		return 0, errors.New("kube test environment: no go_gc_duration_seconds_count in the API server's metrics")
	}
	return int(n), nil
}

// binaryFromEnv resolves a binary path: the explicit value, else the environment, else the default.
func binaryFromEnv(explicit, env, def string) string {
	if explicit != "" {
		return explicit
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// Binaries returns the kube-apiserver and etcd binaries cfg would run.
func Binaries(cfg Config) (apiserver, etcd string) {
	return binaryFromEnv(cfg.Binary, "NFTPOLICY_KUBE_APISERVER", DefaultBinary),
		binaryFromEnv(cfg.Etcd, "NFTPOLICY_ETCD", DefaultEtcd)
}

// CheckBinaries reports, with the fix in the message, when a binary cfg needs is missing.
func CheckBinaries(cfg Config) error {
	api, etcd := Binaries(cfg)
	for _, b := range []string{api, etcd} {
		st, err := os.Stat(b)
		if err != nil {
			return fmt.Errorf("kube test environment: %v; run `make deps`", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("kube test environment: %s is not an executable file; run `make deps`", b)
		}
	}
	return nil
}

// Start runs etcd and kube-apiserver on free loopback ports and returns once /readyz answers
// ok. ctx bounds the start-up only; the processes live until Stop. On a port clash (another
// process took a port between choosing and binding it) it retries once with new ports.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	return start(ctx, cfg, freePorts)
}

// start is Start with the port picker as a parameter, so a test can hand out a taken port.
func start(ctx context.Context, cfg Config, pickPorts func(n int) ([]int, error)) (*Server, error) {
	if err := CheckBinaries(cfg); err != nil {
		return nil, err
	}
	s, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		err = s.startProcesses(ctx, pickPorts)
		if err == nil {
			return s, nil
		}
		s.killAll()
		if attempt > 0 || ctx.Err() != nil || !errors.Is(err, errExited) {
			_ = s.Stop()
			return nil, err
		}
		// A process that exits during start-up most likely lost its port to someone else:
		// try once more with new ports and a fresh etcd data dir.
		if rmErr := os.RemoveAll(filepath.Join(s.Dir, "etcd")); rmErr != nil {
			_ = s.Stop()
			return nil, errors.Join(err, rmErr)
		}
	}
}

// prepare makes the directory, credentials, certificates and client configuration.
func prepare(cfg Config) (s *Server, err error) {
	s = &Server{Dir: cfg.Dir, profiling: cfg.Profiling, tail: &tailBuffer{max: 8 << 10}}
	s.binary, s.etcdBinary = Binaries(cfg)
	if s.Dir == "" {
		removeStaleDirs()
		if s.Dir, err = os.MkdirTemp("", dirPrefix); err != nil {
			return nil, fmt.Errorf("kube test environment: %w", err)
		}
		s.ownDir = true
	} else if err = os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kube test environment: %w", err)
	}
	defer func() {
		if err != nil {
			_ = s.Stop()
			s = nil
		}
	}()
	if s.ownDir {
		if err := os.WriteFile(filepath.Join(s.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return nil, fmt.Errorf("kube test environment: %w", err)
		}
	}
	// Every Start is a fresh cluster, also in a Dir left by an earlier run.
	if err := os.RemoveAll(filepath.Join(s.Dir, "etcd")); err != nil {
		return nil, fmt.Errorf("kube test environment: %w", err)
	}

	s.log = cfg.Log
	if s.log == nil {
		f, err := os.Create(filepath.Join(s.Dir, "log"))
		if err != nil {
			return nil, fmt.Errorf("kube test environment: %w", err)
		}
		s.log, s.closeLog = f, f.Close
	}
	s.log = io.MultiWriter(s.log, s.tail)

	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("kube test environment: token: %w", err)
	}
	s.Token = hex.EncodeToString(tok)
	if err := os.WriteFile(filepath.Join(s.Dir, "tokens.csv"),
		[]byte(s.Token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, fmt.Errorf("kube test environment: token file: %w", err)
	}
	caPEM, err := writeCredentials(s.Dir, cfg.ServingIPs)
	if err != nil {
		return nil, fmt.Errorf("kube test environment: %w", err)
	}
	s.CAData = caPEM
	return s, nil
}

const (
	// dirPrefix starts the name of every temporary directory Start makes.
	dirPrefix = "nftp-kube-"
	// ownerFile in such a directory holds the pid of the process that made it.
	ownerFile = "owner.pid"
)

// removeStaleDirs removes the temporary directories of earlier runs whose process died without
// Stop (SIGKILL, test timeout); Pdeathsig already took their etcd and kube-apiserver. A
// directory whose owner is alive, or that has no owner file yet, is left alone.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid <= 0 {
			continue
		}
		if !alive(pid) {
			_ = os.RemoveAll(d)
		}
	}
}

// alive reports whether pid runs: it exists and is not a zombie (a container's pid 1 may never
// reap the orphans it inherits).
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

var errExited = errors.New("process exited during start-up")

// startProcesses picks ports and starts etcd then kube-apiserver, waiting for each to serve.
func (s *Server) startProcesses(ctx context.Context, pickPorts func(n int) ([]int, error)) error {
	ports, err := pickPorts(3)
	if err != nil {
		return fmt.Errorf("kube test environment: %w", err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.EtcdURL = clientURL
	s.apiPort = ports[2]
	s.URL = "https://127.0.0.1:" + strconv.Itoa(s.apiPort)
	s.Config = &rest.Config{
		Host:            s.URL,
		BearerToken:     s.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData},
		QPS:             500,
		Burst:           1000,
		Timeout:         30 * time.Second,
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return fmt.Errorf("kube test environment: clientset: %w", err)
	}

	etcd, err := s.spawn("etcd", s.etcdBinary,
		"--name=default",
		"--data-dir="+filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--initial-cluster-state=new",
		"--log-level=warn",
		// A test cluster's data need not survive a crash: without fsync a write's latency is
		// etcd's and the API server's, not the machine's disk's.
		"--unsafe-no-fsync",
	)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.etcd = etcd
	s.mu.Unlock()
	if err := waitHTTP(ctx, etcd, http.DefaultClient, clientURL+"/health", ""); err != nil {
		return fmt.Errorf("kube test environment: etcd: %w%s", err, s.logTail())
	}
	return s.startAPIServer(ctx)
}

// startAPIServer starts kube-apiserver on s.apiPort and waits for /readyz.
func (s *Server) startAPIServer(ctx context.Context) error {
	d := s.Dir
	api, err := s.spawn("kube-apiserver", s.binary,
		"--etcd-servers="+s.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address="+advertiseAddress,
		"--secure-port="+strconv.Itoa(s.apiPort),
		"--cert-dir="+filepath.Join(d, "apiserver-certs"),
		"--tls-cert-file="+filepath.Join(d, "serving.crt"),
		"--tls-private-key-file="+filepath.Join(d, "serving.key"),
		"--token-auth-file="+filepath.Join(d, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(d, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(d, "sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--profiling="+strconv.FormatBool(s.profiling),
	)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.api = api
	s.mu.Unlock()
	hc, err := s.httpClient()
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, api, hc, s.URL+"/readyz", s.Token); err != nil {
		return fmt.Errorf("kube test environment: kube-apiserver: %w%s", err, s.logTail())
	}
	if err := s.waitBootstrap(ctx, api); err != nil {
		return fmt.Errorf("kube test environment: kube-apiserver: %w%s", err, s.logTail())
	}
	return nil
}

// waitBootstrap waits for what the API server creates itself shortly after /readyz turns ok:
// the system namespaces and the system priority classes. Tests, and manifests naming
// kube-system or system-node-critical, may rely on them as soon as Start returns.
func (s *Server) waitBootstrap(ctx context.Context, p *process) error {
	return poll(ctx, 50*time.Millisecond, p, "bootstrap objects", func() (error, error) {
		for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
			if _, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("namespace %s: %w", ns, err), nil
			}
		}
		for _, pc := range []string{"system-node-critical", "system-cluster-critical"} {
			if _, err := s.Client.SchedulingV1().PriorityClasses().Get(ctx, pc, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("priority class %s: %w", pc, err), nil
			}
		}
		return nil, nil
	})
}

// poll calls check every interval until it reports neither "not yet" nor a failure, it fails,
// process p (nil: none) exits, or ctx ends; the last "not yet" goes into the timeout's error.
func poll(ctx context.Context, interval time.Duration, p *process, what string, check func() (notYet, failed error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var exited <-chan struct{}
	if p != nil {
		exited = p.done
	}
	for {
		notYet, failed := check()
		if failed != nil {
			return failed
		}
		if notYet == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w (%s: %v)", errExited, p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), notYet)
		case <-tick.C:
		}
	}
}

func (s *Server) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CAData) {
		return nil, errors.New("kube test environment: bad CA PEM")
	}
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true},
	}, nil
}

// RestartAPIServer stops kube-apiserver only (etcd keeps the data), waits downtime, starts it
// again on the same port and waits for /readyz. Clients keep working afterwards; watches see
// their connection drop, as in a real control-plane outage. The old process is killed with
// SIGKILL, so clients see connections reset, not a graceful drain.
func (s *Server) RestartAPIServer(ctx context.Context, downtime time.Duration) error {
	return <-s.BeginOutage(ctx, downtime)
}

// BeginOutage is RestartAPIServer in two halves: it returns once kube-apiserver is killed, and
// the channel receives RestartAPIServer's result once it is back (after downtime and /readyz), so
// that a test can look at its clients during the outage.
func (s *Server) BeginOutage(ctx context.Context, downtime time.Duration) <-chan error {
	back := make(chan error, 1)
	s.mu.Lock()
	api, stopped := s.api, s.stopped
	s.api = nil
	s.mu.Unlock()
	if stopped {
		back <- errors.New("kube test environment: restart after Stop")
		return back
	}
	if api != nil {
		api.kill()
	}
	go func() { back <- s.endOutage(ctx, downtime) }()
	return back
}

// endOutage waits downtime and starts kube-apiserver again.
func (s *Server) endOutage(ctx context.Context, downtime time.Duration) error {
	if downtime > 0 {
		select {
		case <-time.After(downtime):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := s.startAPIServer(ctx)
	if errors.Is(err, errExited) {
		// The port may linger briefly; one retry covers it.
		s.mu.Lock()
		if s.api != nil {
			s.api.kill()
			s.api = nil
		}
		s.mu.Unlock()
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		err = s.startAPIServer(ctx)
	}
	return err
}

// Stop kills kube-apiserver and etcd (their whole process groups), waits for them and removes
// Dir when Start made it. It is idempotent and safe on a partly started Server.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	s.killAll()
	var errs []error
	if s.closeLog != nil {
		errs = append(errs, s.closeLog())
	}
	if s.ownDir && s.Dir != "" {
		errs = append(errs, os.RemoveAll(s.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kube test environment: stop: %w", err)
	}
	return nil
}

func (s *Server) killAll() {
	s.mu.Lock()
	api, etcd := s.api, s.etcd
	s.api, s.etcd = nil, nil
	s.mu.Unlock()
	if api != nil {
		api.kill()
	}
	if etcd != nil {
		etcd.kill()
	}
}

// Kubeconfig writes a kubeconfig file for the admin token. server is the API server URL the
// file names (empty: s.URL), e.g. https://127.0.0.1:PORT of a port forwarded into a node's
// network namespace; the file trusts the serving CA, whose certificate is valid for 127.0.0.1,
// ::1, localhost and Config.ServingIPs.
func (s *Server) Kubeconfig(path, server string) error {
	return s.KubeconfigToken(path, server, s.Token)
}

// KubeconfigToken is Kubeconfig for another bearer token, e.g. one from ServiceAccountToken,
// to run a program with the identity and RBAC it has in a real cluster.
func (s *Server) KubeconfigToken(path, server, token string) error {
	if server == "" {
		server = s.URL
	}
	c := clientcmdapi.NewConfig()
	c.Clusters["nftpolicy-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: s.CAData}
	c.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["nftpolicy-test"] = &clientcmdapi.Context{Cluster: "nftpolicy-test", AuthInfo: "user"}
	c.CurrentContext = "nftpolicy-test"
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		return fmt.Errorf("kube test environment: kubeconfig %s: %w", path, err)
	}
	return nil
}

// LogTail returns the last few KiB the processes wrote, for failure messages.
func (s *Server) LogTail() string { return s.tail.String() }

func (s *Server) logTail() string {
	t := s.tail.String()
	if t == "" {
		return ""
	}
	return "\n--- last output of etcd/kube-apiserver ---\n" + t
}

// process is one child in its own process group.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been waited for
	err  error         // Wait's result, valid after done
}

func (p *process) kill() {
	// Negative pid: the whole process group (Setpgid made the child its leader).
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// withoutGoTuning is env without GOGC and GOMEMLIMIT: etcd and the API server run with Go's
// defaults whatever the test runs under, since those settings are meant for the agent a benchmark
// measures (a memory limit meant for the agent would have the API server collect over and over).
func withoutGoTuning(env []string) []string {
	return slices.DeleteFunc(env, func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=")
	})
}

// spawn starts a child in its own process group that the kernel kills when this process dies
// (Pdeathsig). Pdeathsig fires when the forking OS thread exits, so the fork happens on a fresh
// goroutine: it never runs on a thread locked by a caller (e.g. one in another network
// namespace, which would also be inherited), and unlocked threads live as long as the process.
func (s *Server) spawn(name, bin string, args ...string) (*process, error) {
	p := &process{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = withoutGoTuning(os.Environ())
	p.cmd.Dir = s.Dir
	p.cmd.Stdout = s.log
	p.cmd.Stderr = s.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() { started <- p.cmd.Start() }()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("kube test environment: start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitHTTP polls url until it answers 200, the process exits, or ctx ends.
func waitHTTP(ctx context.Context, p *process, hc *http.Client, url, token string) error {
	return poll(ctx, 100*time.Millisecond, p, url, func() (error, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(body)), nil
		}
		return nil, nil
	})
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// PIDs returns the process ids of the running etcd and kube-apiserver (each leads its process
// group), for tests that check nothing is left behind.
func (s *Server) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, p := range []*process{s.etcd, s.api} {
		if p != nil {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}
