package sync

import (
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodePodFields decodes a protobuf v1.Pod into p, reading only the fields ConvertPod and a pod
// record use — name, namespace, resourceVersion, creation time and labels; the node, service
// account, host network and the containers' (and init containers') names, restart policies and
// ports; the phase and addresses — and skipping the rest without allocating it: annotations,
// managed fields, owner references, environment, probes, volumes, conditions, container
// statuses. The generated decoder allocates every string of a pod, all garbage once its record
// is made.
//
// p is emptied first; its labels map and its slices are reused from the pod decoded before.
// The name, namespace, resourceVersion, labels, phase and the containers' and ports' names are
// views of b, not copies: the caller must be done with p before b changes (the record copies
// what it keeps: recordPod, LabelsOf, the interner). The node, service account and addresses
// are copies (a conversion error may quote an address).
//
// For every encoding the generated decoder reads, the record made of p is the one a watch
// event makes of the same bytes, or decodePodFields returns an error (and decodePod uses the
// generated decoder): TestPodListDecoderEquivalence checks it over a corpus of pods,
// TestPodListDecoderCoversConvertPod field by field of corev1.Pod, FuzzPodDecoders over random
// bytes. A field that ConvertPod or the record starts to read must be decoded here too; the
// second test fails until it is.
func decodePodFields(b []byte, p *corev1.Pod) error {
	labels := p.Labels
	clear(labels)
	containers, inits, ips := p.Spec.Containers[:0], p.Spec.InitContainers[:0], p.Status.PodIPs[:0]
	*p = corev1.Pod{}
	p.Labels, p.Spec.Containers, p.Spec.InitContainers, p.Status.PodIPs = labels, containers, inits, ips
	return eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1: // metadata
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case 1:
					p.Name = view(v)
				case 3:
					p.Namespace = view(v)
				case 6:
					p.ResourceVersion = view(v)
				case 8: // creationTimestamp, as metav1.Time decodes it: an occurrence replaces the
					// one before; empty, it is the zero time, else seconds 1 (nanos 2 dropped)
					p.CreationTimestamp = metav1.Time{}
					if len(v) == 0 {
						return nil
					}
					var seconds int64
					if err := eachField(v, func(num protowire.Number, _ []byte, x uint64) error {
						if num == 1 {
							seconds = int64(x)
						}
						return nil
					}); err != nil {
						return err
					}
					p.CreationTimestamp = metav1.Unix(seconds, 0)
				case 11:
					k, val, err := labelEntry(v)
					if err != nil {
						return err
					}
					if p.Labels == nil {
						p.Labels = map[string]string{}
					}
					p.Labels[view(k)] = view(val)
				}
				return nil
			})
		case 2: // spec
			return eachField(v, func(num protowire.Number, v []byte, x uint64) error {
				switch num {
				case 2:
					p.Spec.Containers = nextContainer(p.Spec.Containers)
					return decodeContainer(v, &p.Spec.Containers[len(p.Spec.Containers)-1])
				case 20:
					p.Spec.InitContainers = nextContainer(p.Spec.InitContainers)
					return decodeContainer(v, &p.Spec.InitContainers[len(p.Spec.InitContainers)-1])
				case 8:
					p.Spec.ServiceAccountName = string(v)
				case 10:
					p.Spec.NodeName = string(v)
				case 11:
					p.Spec.HostNetwork = x != 0
				}
				return nil
			})
		case 3: // status
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case 1:
					p.Status.Phase = corev1.PodPhase(view(v))
				case 6:
					p.Status.PodIP = string(v)
				case 12:
					ip := corev1.PodIP{}
					err := eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
						if num == 1 {
							ip.IP = string(v)
						}
						return nil
					})
					p.Status.PodIPs = append(p.Status.PodIPs, ip)
					return err
				}
				return nil
			})
		}
		return nil
	})
}

// labelEntry reads an entry of the labels map: key 1, value 2. The generated decoder reads
// fields 1 and 2 of an entry as length-delimited whatever their tag's wire type, and a key or
// value running past the entry's end; here either is an error (decodePod then decodes the pod
// with the generated decoder).
func labelEntry(b []byte) (key, value []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num != 1 && num != 2:
			n = protowire.ConsumeFieldValue(num, typ, b)
		case typ != protowire.BytesType:
			return nil, nil, fmt.Errorf("a label's field %d has wire type %d", num, typ)
		case num == 1:
			key, n = protowire.ConsumeBytes(b)
		default:
			value, n = protowire.ConsumeBytes(b)
		}
		if n < 0 {
			return nil, nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return key, value, nil
}

// nextContainer appends an empty container, reusing the array's element and its ports' array.
func nextContainer(cs []corev1.Container) []corev1.Container {
	if len(cs) < cap(cs) {
		cs = cs[:len(cs)+1]
		c := &cs[len(cs)-1]
		*c = corev1.Container{Ports: c.Ports[:0]}
		return cs
	}
	return append(cs, corev1.Container{})
}

func decodeContainer(b []byte, c *corev1.Container) error {
	return eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			c.Name = view(v)
		case 24:
			rp := corev1.ContainerRestartPolicy(v)
			c.RestartPolicy = &rp
		case 6:
			port := corev1.ContainerPort{}
			err := eachField(v, func(num protowire.Number, v []byte, x uint64) error {
				switch num {
				case 1:
					port.Name = view(v)
				case 3:
					port.ContainerPort = int32(x)
				case 4:
					port.Protocol = corev1.Protocol(v)
				}
				return nil
			})
			c.Ports = append(c.Ports, port)
			return err
		}
		return nil
	})
}

// eachField calls f with each field of the message b: its number and either its bytes (length
// delimited) or its value (varint); fixed-size fields are skipped.
func eachField(b []byte, f func(num protowire.Number, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := f(num, v, x); err != nil {
			return err
		}
	}
	return nil
}

// view is b as a string without a copy: valid while b is.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
