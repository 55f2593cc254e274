package testenv

import "testing"

func TestMetricValue(t *testing.T) {
	page := `# HELP nftpolicy_transactions_total Netlink transactions committed.
# TYPE nftpolicy_transactions_total counter
nftpolicy_transactions_total 3
nftpolicy_transactions 7
nftpolicy_source_resource_version{resource="pods"} 1.2345e+06
nftpolicy_source_resource_version{resource="namespaces"} 42
go_gc_duration_seconds_count 17
`
	for _, tt := range []struct {
		sample string
		want   float64
		ok     bool
	}{
		{"nftpolicy_transactions_total", 3, true},
		{"nftpolicy_transactions", 7, true}, // not the _total line that starts with it
		{`nftpolicy_source_resource_version{resource="pods"}`, 1234500, true},
		{`nftpolicy_source_resource_version{resource="namespaces"}`, 42, true},
		{"go_gc_duration_seconds_count", 17, true},
		{`nftpolicy_source_resource_version{resource="networkpolicies"}`, 0, false},
		{"nftpolicy_source_resource_version", 0, false}, // only labelled samples
		{"absent", 0, false},
	} {
		if got, ok := MetricValue(page, tt.sample); got != tt.want || ok != tt.ok {
			t.Errorf("MetricValue(%s) = %v, %v; want %v, %v", tt.sample, got, ok, tt.want, tt.ok)
		}
	}
}
