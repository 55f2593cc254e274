package fqdn

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// MaxChain is the most CNAME links ParseAnswer follows from the question's name.
const MaxChain = 8

// ErrNotAnswer says that a message is not a successful response to one A or AAAA question: it
// carries nothing for the Cache (a query, an error response, another type).
var ErrNotAnswer = errors.New("not an A or AAAA answer")

// Answer is what one DNS response says about addresses.
type Answer struct {
	// Chain is the question's name, then each CNAME target followed from it, canonical.
	Chain []string
	// Records are the addresses owned by names of Chain.
	Records []Record
}

// Record is one answered address.
type Record struct {
	Addr netip.Addr
	// TTL is the smallest TTL on the chain up to and including the address's own record.
	TTL time.Duration
	// Owner is the index in Chain of the name that owns the address's record.
	Owner int
}

// ParseAnswer parses a DNS message (the UDP payload, or a TCP message without its length
// prefix). It returns ErrNotAnswer, wrapped, for a message that is not a successful response to
// one A or AAAA question of class IN, and an error for one that does not parse.
func ParseAnswer(msg []byte) (Answer, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return Answer{}, fmt.Errorf("parsing DNS header: %w", err)
	}
	if !h.Response || h.RCode != dnsmessage.RCodeSuccess {
		return Answer{}, fmt.Errorf("%w: response %t, rcode %v", ErrNotAnswer, h.Response, h.RCode)
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return Answer{}, fmt.Errorf("parsing DNS questions: %w", err)
	}
	if len(qs) != 1 || qs[0].Class != dnsmessage.ClassINET || (qs[0].Type != dnsmessage.TypeA && qs[0].Type != dnsmessage.TypeAAAA) {
		return Answer{}, fmt.Errorf("%w: %d questions", ErrNotAnswer, len(qs))
	}
	rrs, err := p.AllAnswers()
	if err != nil {
		return Answer{}, fmt.Errorf("parsing DNS answers: %w", err)
	}
	a := Answer{Chain: []string{Canonical(qs[0].Name.String())}}
	// ttls[i] is the smallest TTL of the CNAME links that lead from the question to Chain[i].
	ttls := []uint32{^uint32(0)}
	for len(a.Chain) <= MaxChain {
		last := a.Chain[len(a.Chain)-1]
		next := ""
		for _, rr := range rrs {
			if cn, ok := rr.Body.(*dnsmessage.CNAMEResource); ok && rr.Header.Class == dnsmessage.ClassINET && Canonical(rr.Header.Name.String()) == last {
				next = Canonical(cn.CNAME.String())
				ttls = append(ttls, min(ttls[len(ttls)-1], rr.Header.TTL))
				break
			}
		}
		if next == "" || chainHas(a.Chain, next) {
			break
		}
		a.Chain = append(a.Chain, next)
	}
	if len(ttls) > len(a.Chain) {
		ttls = ttls[:len(a.Chain)] // a loop's last link leads nowhere new
	}
	for _, rr := range rrs {
		if rr.Header.Class != dnsmessage.ClassINET {
			continue
		}
		var addr netip.Addr
		switch b := rr.Body.(type) {
		case *dnsmessage.AResource:
			addr = netip.AddrFrom4(b.A)
		case *dnsmessage.AAAAResource:
			addr = netip.AddrFrom16(b.AAAA).Unmap()
		default:
			continue
		}
		owner := chainIndex(a.Chain, Canonical(rr.Header.Name.String()))
		if owner < 0 {
			continue
		}
		ttl := min(ttls[owner], rr.Header.TTL)
		a.Records = append(a.Records, Record{Addr: addr, TTL: time.Duration(ttl) * time.Second, Owner: owner})
	}
	return a, nil
}

func chainHas(chain []string, name string) bool { return chainIndex(chain, name) >= 0 }

func chainIndex(chain []string, name string) int {
	for i, n := range chain {
		if n == name {
			return i
		}
	}
	return -1
}
