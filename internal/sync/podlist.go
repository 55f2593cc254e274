package sync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// The pod informer's list, decoded pod by pod. client-go's typed list decodes a PodList: one
// array of full Pod values grown item by item, all alive until the informer has transformed
// them. Here the protobuf response is walked item by item, each pod decoded by decodePodFields
// (only the fields its record reads; the generated decoder for a pod it rejects, decodePod) and
// turned into what the cache keeps of it (its podRecord) at once, into a list of pointers. It
// matters because the API server answers the initial list in one response (the watch cache
// ignores `limit` at resourceVersion 0). The pod informer takes this list rather than
// client-go's streaming list (WatchListClient), whose events are decoded whole: at 100,000 pods
// the stream cost the agent and the API server more CPU than this list (client.go).

// protobufMagic starts every protobuf-encoded Kubernetes object (runtime.Unknown follows).
var protobufMagic = []byte("k8s\x00")

// listPods lists the pods of all namespaces, decoding the response as it arrives; an answer that
// is not protobuf is decoded whole, by a second request.
func (c *restClient) listPods(ctx context.Context, o metav1.ListOptions, record func(*corev1.Pod) *podRecord) (runtime.Object, error) {
	get := func() *rest.Request { // as cache.NewListWatchFromClient lists
		return c.core.Get().Resource("pods").VersionedParams(&o, metav1.ParameterCodec)
	}
	body, err := get().SetHeader("Accept", runtime.ContentTypeProtobuf).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	r := bufio.NewReaderSize(body, 64<<10)
	if magic, err := r.Peek(len(protobufMagic)); err != nil || !bytes.Equal(magic, protobufMagic) {
		list := &corev1.PodList{}
		return list, get().Do(ctx).Into(list)
	}
	_, _ = r.Discard(len(protobufMagic))
	return decodePodList(r, record)
}

// decodePodList reads a protobuf runtime.Unknown holding a v1.PodList (after the magic) into a
// list of pod records (made by record), one pod at a time: neither the response nor the list's
// raw bytes are held whole.
func decodePodList(r *bufio.Reader, record func(*corev1.Pod) *podRecord) (*metainternalversion.List, error) {
	d := pbReader{r: r, record: record}
	list := &metainternalversion.List{}
	raw, err := d.envelope(list)
	if err != nil {
		return nil, fmt.Errorf("decoding the pod list: %w", err)
	}
	if !raw {
		return nil, errors.New("decoding the pod list: the envelope holds no list")
	}
	return list, nil
}

// envelope reads the runtime.Unknown around the list; raw reports that it held one.
func (d *pbReader) envelope(list *metainternalversion.List) (raw bool, err error) {
	for {
		num, typ, err := d.tag()
		if err == io.EOF {
			return raw, nil
		}
		if err != nil {
			return raw, err
		}
		switch {
		case num == 1 && typ == protowire.BytesType: // typeMeta
			b, err := d.bytes()
			if err != nil {
				return raw, err
			}
			var tm runtime.TypeMeta
			if err := tm.Unmarshal(b); err != nil {
				return raw, err
			}
			if tm.Kind != "" && tm.Kind != "PodList" {
				return raw, fmt.Errorf("got a %s", tm.Kind)
			}
		case num == 2 && typ == protowire.BytesType: // raw: the PodList
			n, err := d.length()
			if err != nil {
				return raw, err
			}
			if err := d.podList(n, list); err != nil {
				return raw, err
			}
			raw = true
		case num == 3 && typ == protowire.BytesType: // contentEncoding
			b, err := d.bytes()
			if err != nil {
				return raw, err
			}
			if len(b) > 0 {
				return raw, fmt.Errorf("content encoding %q", b)
			}
		default: // contentType, or fields of a later version
			if err := d.skip(typ); err != nil {
				return raw, err
			}
		}
	}
}

// pbReader reads protobuf fields from a stream; buf is reused for each field's bytes (the
// generated decoders copy what they keep).
type pbReader struct {
	r      *bufio.Reader
	buf    []byte
	n      int64                        // bytes consumed
	record func(*corev1.Pod) *podRecord // what podList keeps of each pod
}

// varint reads a varint inside a field: the stream may not end there.
func (d *pbReader) varint() (uint64, error) {
	v, err := binary.ReadUvarint(byteCounter{d})
	return v, noEOF(err)
}

// tag reads a field's tag; io.EOF when the stream ends between fields (ReadUvarint reports an
// end inside the varint as io.ErrUnexpectedEOF).
func (d *pbReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := binary.ReadUvarint(byteCounter{d})
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, errors.New("invalid field number")
	}
	return num, typ, nil
}

func (d *pbReader) length() (int64, error) {
	v, err := d.varint()
	if err != nil {
		return 0, err
	}
	if v > 1<<31 {
		return 0, fmt.Errorf("field of %d bytes", v)
	}
	return int64(v), nil
}

// bytes reads a length-delimited field's value into the reused buffer.
func (d *pbReader) bytes() ([]byte, error) {
	n, err := d.length()
	if err != nil {
		return nil, err
	}
	if int64(cap(d.buf)) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, noEOF(err)
	}
	d.n += n
	return b, nil
}

func (d *pbReader) discard(n int64) error {
	got, err := d.r.Discard(int(n))
	d.n += int64(got)
	return noEOF(err)
}

// skip reads past a field's value.
func (d *pbReader) skip(typ protowire.Type) error {
	switch typ {
	case protowire.VarintType:
		_, err := d.varint()
		return err
	case protowire.Fixed32Type:
		return d.discard(4)
	case protowire.Fixed64Type:
		return d.discard(8)
	case protowire.BytesType:
		n, err := d.length()
		if err != nil {
			return err
		}
		return d.discard(n)
	}
	return fmt.Errorf("unsupported wire type %d", typ)
}

// podList reads a v1.PodList of size bytes: its metadata and its items, each pod decoded
// (decodePod) and turned into its record at once.
func (d *pbReader) podList(size int64, list *metainternalversion.List) error {
	end := d.n + size
	// One Pod value, its labels map and its slices serve every item: decoding each pod anew would
	// leave ≈ 1.6 KB of garbage a pod for the collector during the list. A record keeps none of
	// them: the conversion builds its own slices.
	var p corev1.Pod
	for d.n < end {
		num, typ, err := d.tag()
		if err != nil {
			return noEOF(err)
		}
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			if err := d.skip(typ); err != nil {
				return err
			}
			continue
		}
		b, err := d.bytes()
		if err != nil {
			return err
		}
		if num == 1 { // metadata
			if err := list.ListMeta.Unmarshal(b); err != nil {
				return fmt.Errorf("its metadata: %w", err)
			}
			continue
		}
		// items: b stays unchanged until the record is made
		pod, err := decodePod(b, &p)
		if err != nil {
			return fmt.Errorf("pod %d: %w", len(list.Items), err)
		}
		list.Items = append(list.Items, d.record(pod))
	}
	if d.n != end {
		return errors.New("a field overruns the list")
	}
	return nil
}

// decodePod decodes one pod of the list: into p by decodePodFields, or, for bytes it rejects,
// by the generated decoder into a Pod of its own, as a watch event's pod is decoded.
// decodePodFields rejects some encodings that the generated decoder reads (a varint of more than
// 64 bits, a group closed by another field number, a label's key or value of another wire
// type) and the API server does not write: the list fails only on a pod that client-go's own
// list would fail on.
func decodePod(b []byte, p *corev1.Pod) (*corev1.Pod, error) {
	if decodePodFields(b, p) == nil {
		return p, nil
	}
	whole := &corev1.Pod{}
	if err := whole.Unmarshal(b); err != nil {
		return nil, err
	}
	return whole, nil
}

// byteCounter counts the bytes binary.ReadUvarint takes.
type byteCounter struct{ d *pbReader }

func (c byteCounter) ReadByte() (byte, error) {
	b, err := c.d.r.ReadByte()
	if err == nil {
		c.d.n++
	}
	return b, err
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
