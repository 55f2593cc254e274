package sync

import (
	"encoding/json"
	"reflect"
	"testing"

	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

var typeMetaCorpus = []struct {
	doc  string
	read bool // typeMeta reads it rather than DefaultMetaFactory
}{
	{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"kind":"x"}}}`, true},
	{`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","spec":{"ingress":[{"from":[{"podSelector":{}}]}],"policyTypes":["Ingress"]}}`, true},
	{`{"kind":"List","apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Namespace"}]}`, true},
	{` { "apiVersion" : "v1" , "kind" : "Node" } `, true},
	{`{}`, true},
	{`{"metadata":{"name":"x"}}`, true},
	{`{"KIND":"Pod","ApiVersion":"v1"}`, true},
	{`{"kind":"Pod","kind":"Node","apiVersion":"v1"}`, true},
	{`{"a":[1,2.5e3,-1,true,false,null,"s\"}",{"b":"]"}],"kind":"Pod","apiVersion":"apps/v1"}`, true},
	{`{"apiVersion":"a/b/c","kind":"Pod"}`, true},
	{`{"apiVersion":"v1","kind":"P\u00f6d"}`, false},
	{`{"apiVersion":"v1","kind":"Pöd"}`, false},
	{`{"apiVersion":"v1","kind":null}`, false},
	{`{"apiVersion":"v1","kind":5}`, false},
	{`{"apiVersion":"v1","kind":{"a":1}}`, false},
	{`{"k\u0069nd":"Pod"}`, false},
	{"{\"\u212aind\":\"Pod\"}", false},
	{`[{"kind":"Pod"}]`, false},
	{`"Pod"`, false},
	{`null`, false},
}

// TestTypeMetaMatchesDefault: typeMeta finds what DefaultMetaFactory finds, or fails as it does.
func TestTypeMetaMatchesDefault(t *testing.T) {
	for _, tt := range typeMetaCorpus {
		_, _, read := topLevelTypeMeta([]byte(tt.doc))
		if read != tt.read {
			t.Errorf("%s: read = %v, want %v", tt.doc, read, tt.read)
		}
		checkTypeMeta(t, []byte(tt.doc))
	}
}

func checkTypeMeta(t *testing.T, doc []byte) {
	t.Helper()
	got, err := typeMeta{}.Interpret(doc)
	want, wantErr := kjson.DefaultMetaFactory.Interpret(doc)
	if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %v, %v; DefaultMetaFactory %v, %v", doc, got, err, want, wantErr)
	}
}

// FuzzTypeMeta: for any valid JSON, typeMeta and DefaultMetaFactory agree.
func FuzzTypeMeta(f *testing.F) {
	for _, tt := range typeMetaCorpus {
		f.Add(tt.doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		checkTypeMeta(t, []byte(doc))
	})
}
