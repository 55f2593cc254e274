package sync

import (
	"bufio"
	"bytes"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ListPodDecoder decodes pods as the pod informer's list decodes its items: into one Pod value
// that every call reuses, then into the record the cache keeps.
type ListPodDecoder struct {
	w *Watcher
	p corev1.Pod
}

// ListPodDecoder returns a decoder of list items whose records w makes.
func (w *Watcher) ListPodDecoder() *ListPodDecoder { return &ListPodDecoder{w: w} }

// Record decodes the protobuf v1.Pod b as the list decodes an item (decodePod: decodePodFields,
// or the generated decoder for what it rejects) and returns its record.
func (d *ListPodDecoder) Record(b []byte) (CachedPodRecord, error) {
	r, err := d.record(b)
	if err != nil {
		return CachedPodRecord{}, err
	}
	rec, _ := CachedPod(r)
	return rec, nil
}

// Decode decodes b as Record does and drops the record: the list's cost of one pod.
func (d *ListPodDecoder) Decode(b []byte) error {
	_, err := d.record(b)
	return err
}

func (d *ListPodDecoder) record(b []byte) (*podRecord, error) {
	p, err := decodePod(b, &d.p)
	if err != nil {
		return nil, err
	}
	return d.w.recordPod(p), nil
}

// HandDecodes reports why decodePodFields rejects the protobuf v1.Pod b (nil: it decodes it).
func HandDecodes(b []byte) error {
	var p corev1.Pod
	return decodePodFields(b, &p)
}

// DecodePodList decodes a protobuf PodList response (from its magic on) as the pod informer's
// list does: the list's metadata and the record of each pod, in order.
func (w *Watcher) DecodePodList(b []byte) (metav1.ListMeta, []CachedPodRecord, error) {
	if !bytes.HasPrefix(b, protobufMagic) {
		return metav1.ListMeta{}, nil, errors.New("no protobuf magic")
	}
	list, err := decodePodList(bufio.NewReader(bytes.NewReader(b[len(protobufMagic):])), w.recordPod)
	if err != nil {
		return metav1.ListMeta{}, nil, err
	}
	recs := make([]CachedPodRecord, len(list.Items))
	for i, obj := range list.Items {
		recs[i], _ = CachedPod(obj)
	}
	return list.ListMeta, recs, nil
}
