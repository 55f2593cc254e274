package testenv

import (
	"hash/fnv"
	"math/rand/v2"
)

// Chooser is where a test's random generator draws its choices: a *math/rand.Rand, or a
// fuzzer's input (Choices).
type Chooser interface{ Intn(n int) int }

// Choices draws a generator's choices from a fuzzer's input: a byte a choice (two for more
// than 256 values, and so on) while the input lasts, then from a pseudo-random sequence seeded
// by the whole input. The fuzzer's changes to the input's first bytes change the first choices
// alone, and a short input makes as large a case as a long one.
type Choices struct {
	b    []byte
	rest *rand.Rand
}

// NewChoices returns the choices of input b.
func NewChoices(b []byte) *Choices {
	h := fnv.New64a()
	h.Write(b)
	return &Choices{b: b, rest: rand.New(rand.NewPCG(h.Sum64(), uint64(len(b))))}
}

// Intn returns a choice in [0, n); with n ≤ 1, 0 without using the input.
func (c *Choices) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	size := 0
	for m := n - 1; m > 0; m >>= 8 {
		size++
	}
	if len(c.b) < size {
		c.b = nil
		return c.rest.IntN(n)
	}
	v := 0
	for _, x := range c.b[:size] {
		v = v<<8 | int(x)
	}
	c.b = c.b[size:]
	return v % n
}
