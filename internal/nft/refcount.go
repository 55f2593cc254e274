package nft

// refs counts the holders of objects of the table that several others use: a class chain (by
// the groups whose elements lead to it), a shared set (by the listed groups that look it up), a
// deny chain (by the class chains and maps that go to it). Acquire reports the first holder and
// Release the last, so the caller creates the object exactly when it is first used and drops it
// exactly when it is last released; a key is held while its count is above zero.
type refs[K comparable] struct {
	n map[K]int
}

func newRefs[K comparable]() refs[K] { return refs[K]{n: map[K]int{}} }

// acquire takes one reference to k and reports whether it is the first.
func (r refs[K]) acquire(k K) (first bool) {
	r.n[k]++
	return r.n[k] == 1
}

// release drops one reference to k and reports whether it was the last (k is then forgotten).
// Releasing a key that is not held reports false and changes nothing.
func (r refs[K]) release(k K) (last bool) {
	c, ok := r.n[k]
	if !ok {
		return false
	}
	if c > 1 {
		r.n[k] = c - 1
		return false
	}
	delete(r.n, k)
	return true
}

// held reports whether k has a holder.
func (r refs[K]) held(k K) bool {
	_, ok := r.n[k]
	return ok
}

// keys calls yield for each held key, in no order.
func (r refs[K]) keys(yield func(K) bool) {
	for k := range r.n {
		if !yield(k) {
			return
		}
	}
}
