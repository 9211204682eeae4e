package tokenizer

// priorityQueue is a binary heap ordered by before (container/heap boxes every
// element in an interface, which dominated the allocation profile).
type queueItem[T any] interface{ before(T) bool }

type priorityQueue[T queueItem[T]] []T

func (q *priorityQueue[T]) push(x T) {
	h := append(*q, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *priorityQueue[T]) pop() T {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}
