package retrieve

import (
	"math"
	"strings"
	"unicode"
)

// BM25 parameters (the usual Okapi values).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// stopWords are common English words that carry no topic; they are not
// search terms.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren't as at
		be because been before being below between both but by can can't cannot could couldn't did didn't
		do does doesn't doing don't down during each few for from further had hadn't has hasn't have
		haven't having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
		i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor not of
		off on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
		should shouldn't so some such than that that's the their theirs them themselves then there there's
		these they they'd they'll they're they've this those through to too under until up very was wasn't
		we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
		whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself
		yourselves also just will shall may might must please tell give say says said`) {
		m[w] = true
	}
	return m
}()

// searchTerms splits text into lower-case search terms: runs of letters and
// digits (apostrophes inside words kept), each Han, Hiragana or Katakana
// character alone (those scripts do not separate words with spaces); stop
// words and one-letter words are dropped.
func searchTerms(text string) []string {
	var terms []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		// Trim apostrophes at the ends.
		for len(word) > 0 && isApostrophe(word[len(word)-1]) {
			word = word[:len(word)-1]
		}
		for len(word) > 0 && isApostrophe(word[0]) {
			word = word[1:]
		}
		w := strings.ReplaceAll(string(word), "’", "'")
		w = strings.TrimSuffix(w, "'s")
		word = word[:0]
		if w == "" || stopWords[w] {
			return
		}
		if len([]rune(w)) == 1 && !unicode.IsDigit([]rune(w)[0]) {
			return
		}
		terms = append(terms, w)
	}
	for _, r := range text {
		switch {
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana):
			flush()
			terms = append(terms, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || (unicode.IsMark(r) && len(word) > 0):
			word = append(word, unicode.ToLower(r))
		case isApostrophe(r) && len(word) > 0:
			word = append(word, '\'')
		default:
			flush()
		}
	}
	flush()
	return terms
}

func isApostrophe(r rune) bool { return r == '\'' || r == '’' }

// bm25Index ranks passages against a query.
type bm25Index struct {
	tf     []map[string]int
	length []int
	df     map[string]int
	avg    float64
}

func newBM25(passages []string) *bm25Index {
	ix := &bm25Index{df: map[string]int{}}
	total := 0
	for _, p := range passages {
		tf := map[string]int{}
		terms := searchTerms(p)
		for _, t := range terms {
			tf[t]++
		}
		for t := range tf {
			ix.df[t]++
		}
		ix.tf = append(ix.tf, tf)
		ix.length = append(ix.length, len(terms))
		total += len(terms)
	}
	if len(passages) > 0 {
		ix.avg = float64(total) / float64(len(passages))
	}
	if ix.avg == 0 {
		ix.avg = 1
	}
	return ix
}

// scores are the BM25 scores of every passage for the query's terms (each
// distinct term counted once).
func (ix *bm25Index) scores(query []string) []float64 {
	out := make([]float64, len(ix.tf))
	n := float64(len(ix.tf))
	seen := map[string]bool{}
	for _, t := range query {
		if seen[t] {
			continue
		}
		seen[t] = true
		df := float64(ix.df[t])
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for i, tf := range ix.tf {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			norm := 1 - bm25B + bm25B*float64(ix.length[i])/ix.avg
			out[i] += idf * f * (bm25K1 + 1) / (f + bm25K1*norm)
		}
	}
	return out
}
