// Package retrieve decides how attached documents go into a model's
// context: whole when they fit, else the passages most relevant to the
// question (chunks ranked by BM25), with citations (pages, lines or
// paragraphs), and builds the messages that carry them.
package retrieve

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"nibble/app/documents"
)

// PlanRequest asks how to put documents and a question into a context.
type PlanRequest struct {
	Documents []*documents.Document
	Question  string
	// Count counts tokens with the loaded model's tokenizer.
	Count TokenCounter
	// ContextTokens is the model's context budget; ReserveTokens of it are
	// kept for the answer.
	ContextTokens, ReserveTokens int
	// OverheadTokens is what the chat template adds around the messages
	// (role markers, special tokens); 0 means 64.
	OverheadTokens int
	// ChunkTokens is the target passage size when a document must be cut;
	// 0 picks one from the room available (from 128 to 512 tokens).
	ChunkTokens int
	// OverlapTokens is how much of the passage before a passage repeats;
	// 0 means an eighth of ChunkTokens, negative means none.
	OverlapTokens int
}

// Plan says what of each document goes into the prompt, and holds the
// prompt.
type Plan struct {
	// Whole is true when every document went in whole. The system message
	// then depends only on the documents (not on the question), so the
	// engine service reuses its cached prefix for follow-up questions.
	Whole     bool
	Documents []DocumentPlan
	// Citations are the numbered sources in the prompt: Citations[i] is
	// "[i+1]".
	Citations []Citation
	Messages  Messages
	// PromptTokens counts the messages and the template overhead.
	PromptTokens                 int
	ContextTokens, ReserveTokens int
}

// DocumentPlan is what one document contributes.
type DocumentPlan struct {
	Name  string
	Whole bool
	// Sections is how many passages the document was cut into (1 when it
	// went in whole); Used how many of them are in the prompt.
	Sections, Used int
	// Tokens counts the document's text in the prompt.
	Tokens int
	// Sources are the citation numbers of its text in the prompt.
	Sources []int
	// Status is a line for the user: "fits whole in 8K context", or "too
	// large: answering from the most relevant parts (5 of 212 sections)".
	Status string
}

// Citation is one numbered source in the prompt: a whole document or an
// excerpt of one, with where it is.
type Citation struct {
	Number   int
	Document int // index in PlanRequest.Documents
	Name     string
	Whole    bool
	// Start and End are the byte range of the source in Document.Text.
	Start, End int
	// FirstPage..LastPage for PDFs (else 0); FirstLine..LastLine for text,
	// Markdown, code, CSV and JSON (the file's own lines);
	// FirstParagraph..LastParagraph for HTML and DOCX.
	FirstPage, LastPage           int
	FirstLine, LastLine           int
	FirstParagraph, LastParagraph int
	// Heading is the nearest heading above the excerpt, if any.
	Heading string
	// Label says where in words: "page 4", "pages 4–5", "lines 120–168",
	// "paragraphs 12–18", prefixed with "whole document, " for a whole one.
	Label string
}

// Messages are the chat messages to send: the documents go in the system
// message (first, so that a whole-document prompt has the same prefix for
// every question), the question in the user message.
type Messages struct {
	System, User string
}

const (
	defaultOverhead = 64
	// planMargin absorbs counts that do not add up exactly when texts are
	// joined (a token may straddle the joint).
	planMargin = 16
)

// PlanContext decides how the documents and the question fit into the
// context: every document whole when they all fit (with the question and the
// reserve for the answer); else small documents whole and, from the others,
// the passages that rank best for the question (BM25), in document order,
// as many as fit. The plan holds the assembled messages, their token count
// and a status line per document.
func PlanContext(req PlanRequest) (*Plan, error) {
	if req.Count == nil {
		return nil, errors.New("documents: plan: no token counter")
	}
	if len(req.Documents) == 0 {
		return nil, errors.New("documents: plan: no documents")
	}
	for i, d := range req.Documents {
		if d == nil {
			return nil, fmt.Errorf("documents: plan: document %d is nil", i+1)
		}
	}
	if req.ContextTokens <= 0 {
		return nil, fmt.Errorf("documents: plan: context of %d tokens", req.ContextTokens)
	}
	if req.ReserveTokens < 0 || req.ReserveTokens >= req.ContextTokens {
		return nil, fmt.Errorf("documents: plan: a reserve of %d tokens for the answer leaves no room in a context of %d", req.ReserveTokens, req.ContextTokens)
	}
	if req.OverheadTokens <= 0 {
		req.OverheadTokens = defaultOverhead
	}
	count := safeCount(req.Count)
	p := &planner{req: req, count: count}
	return p.plan()
}

type planner struct {
	req   PlanRequest
	count TokenCounter
}

// docState is a document while planning.
type docState struct {
	doc      *documents.Document
	tokens   int // the whole text
	whole    bool
	chunks   []Chunk
	selected []int // chunk indexes
	spread   bool  // chosen evenly spaced, not by relevance
}

func (p *planner) plan() (*Plan, error) {
	req := p.req
	docs := make([]*docState, len(req.Documents))
	for i, d := range req.Documents {
		docs[i] = &docState{doc: d, tokens: p.count(d.Text)}
	}

	// All whole?
	for _, d := range docs {
		d.whole = true
	}
	plan, fits := p.assemble(docs)
	if fits {
		return plan, nil
	}

	// Room for documents: the context less the reserve, the template,
	// the question and the instructions with every status line.
	for _, d := range docs {
		d.whole = false
	}
	empty, _ := p.assemble(docs)
	room := req.ContextTokens - req.ReserveTokens - empty.PromptTokens - planMargin
	if room <= 0 {
		return nil, fmt.Errorf("documents: plan: the question and instructions take %d of the %d-token context (with %d reserved for the answer): no room for any document", empty.PromptTokens, req.ContextTokens, req.ReserveTokens)
	}

	// Small documents whole, smallest first, each within its fair share.
	order := make([]int, len(docs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return docs[order[a]].tokens < docs[order[b]].tokens })
	left := room
	for k, i := range order {
		d := docs[i]
		cost := d.tokens + p.sourceHeaderTokens(d.doc, "whole document") + 2
		if cost > left/(len(order)-k) {
			break
		}
		d.whole = true
		left -= cost
	}

	chunkTokens := req.ChunkTokens
	if chunkTokens <= 0 {
		chunkTokens = clamp(room/8, 128, 512)
	}
	overlap := req.OverlapTokens
	switch {
	case overlap == 0:
		overlap = chunkTokens / 8
	case overlap < 0:
		overlap = 0
	}
	if overlap >= chunkTokens {
		overlap = chunkTokens / 2
	}
	for {
		plan, ok, err := p.retrieve(docs, room, chunkTokens, overlap)
		if err != nil || ok {
			return plan, err
		}
		// Even with no passages the whole documents do not fit (counts
		// did not add up): cut the largest whole one too and try again.
		largest := -1
		for i, d := range docs {
			if d.whole && (largest < 0 || d.tokens > docs[largest].tokens) {
				largest = i
			}
		}
		if largest < 0 {
			return nil, fmt.Errorf("documents: plan: the prompt takes %d tokens without any document text; the context is %d with %d reserved for the answer", plan.PromptTokens, req.ContextTokens, req.ReserveTokens)
		}
		docs[largest].whole = false
	}
}

// retrieve fills the room left by whole documents with the passages of the
// others that rank best for the question, then assembles the prompt and,
// while it is over the context, drops the weakest passage.
func (p *planner) retrieve(docs []*docState, room, chunkTokens, overlap int) (*Plan, bool, error) {
	left := room
	for _, d := range docs {
		d.selected, d.spread = nil, false
		if d.whole {
			left -= d.tokens + p.sourceHeaderTokens(d.doc, "whole document") + 2
		}
	}
	type cand struct {
		doc, chunk int
		score      float64
		rank       int
	}
	var cands []cand
	var passages []string
	for i, d := range docs {
		if d.whole {
			continue
		}
		if d.chunks == nil {
			chunks, err := ChunkDocument(d.doc, p.count, chunkTokens, overlap)
			if err != nil {
				return nil, false, err
			}
			d.chunks = chunks
		}
		for j, c := range d.chunks {
			cands = append(cands, cand{doc: i, chunk: j})
			passages = append(passages, d.doc.Text[c.Start:c.End])
		}
	}
	terms := searchTerms(p.req.Question)
	relevant := false
	if len(terms) > 0 && len(cands) > 0 {
		scores := newBM25(passages).scores(terms)
		for k := range cands {
			cands[k].score = scores[k]
			if scores[k] > 0 {
				relevant = true
			}
		}
	}
	if relevant {
		// Best first; ties in document order.
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
	} else {
		// Nothing to rank by: spread the choice evenly over each document.
		for k := range cands {
			cands[k].rank = -1
		}
		rank := map[[2]int]int{}
		for i, d := range docs {
			if d.whole {
				continue
			}
			d.spread = true
			for r, j := range spreadOrder(len(d.chunks)) {
				rank[[2]int{i, j}] = r
			}
		}
		for k := range cands {
			cands[k].rank = rank[[2]int{cands[k].doc, cands[k].chunk}]
		}
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].rank < cands[b].rank })
	}
	var picks []int // docs of the chosen passages, in rank order
	for _, c := range cands {
		d := docs[c.doc]
		cost := d.chunks[c.chunk].Tokens + p.sourceHeaderTokens(d.doc, "lines 00000–00000") + 2
		if cost > left {
			continue
		}
		d.selected = append(d.selected, c.chunk)
		picks = append(picks, c.doc)
		left -= cost
	}
	for {
		plan, fits := p.assemble(docs)
		if fits {
			return plan, true, nil
		}
		if len(picks) == 0 {
			return plan, false, nil
		}
		d := docs[picks[len(picks)-1]]
		picks = picks[:len(picks)-1]
		d.selected = d.selected[:len(d.selected)-1]
	}
}

// spreadOrder orders 0..n-1 so that any prefix is spread evenly: the ends,
// then midpoints, breadth first.
func spreadOrder(n int) []int {
	if n <= 0 {
		return nil
	}
	out := []int{0}
	if n == 1 {
		return out
	}
	out = append(out, n-1)
	type span struct{ lo, hi int }
	queue := []span{{0, n - 1}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s.hi-s.lo < 2 {
			continue
		}
		mid := (s.lo + s.hi) / 2
		out = append(out, mid)
		queue = append(queue, span{s.lo, mid}, span{mid, s.hi})
	}
	return out
}

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

func (p *planner) sourceHeaderTokens(d *documents.Document, location string) int {
	return p.count(sourceOpen(99, d.Name, location)) + p.count(sourceClose)
}

// excerpt is a merged run of chosen passages.
type excerpt struct{ start, end int }

// assemble builds the plan for the current choices and reports whether it
// fits the context.
func (p *planner) assemble(docs []*docState) (*Plan, bool) {
	req := p.req
	plan := &Plan{ContextTokens: req.ContextTokens, ReserveTokens: req.ReserveTokens, Whole: true}
	for i, d := range docs {
		dp := DocumentPlan{Name: d.doc.Name, Whole: d.whole}
		cache := &locator{doc: d.doc}
		if d.whole {
			dp.Sections, dp.Used = 1, 1
			c := cache.citation(0, len(d.doc.Text), true)
			c.Number, c.Document, c.Name = len(plan.Citations)+1, i, d.doc.Name
			plan.Citations = append(plan.Citations, c)
			dp.Sources = []int{c.Number}
			dp.Tokens = d.tokens
			dp.Status = "fits whole in " + contextLabel(req.ContextTokens) + " context"
		} else {
			plan.Whole = false
			dp.Sections = len(d.chunks)
			dp.Used = len(d.selected)
			for _, ex := range mergeChunks(d.chunks, d.selected, d.doc.Text) {
				c := cache.citation(ex.start, ex.end, false)
				for _, j := range d.selected {
					if ch := d.chunks[j]; ch.Start >= ex.start && ch.Start < ex.end && ch.Heading != "" {
						c.Heading = ch.Heading
						break
					}
				}
				c.Number, c.Document, c.Name = len(plan.Citations)+1, i, d.doc.Name
				plan.Citations = append(plan.Citations, c)
				dp.Sources = append(dp.Sources, c.Number)
				dp.Tokens += p.count(d.doc.Text[ex.start:ex.end])
			}
			dp.Status = partialStatus(d, dp)
		}
		plan.Documents = append(plan.Documents, dp)
	}
	plan.Messages = BuildPrompt(req.Documents, plan, req.Question)
	plan.PromptTokens = p.count(plan.Messages.System) + p.count(plan.Messages.User) + req.OverheadTokens
	fits := plan.PromptTokens+req.ReserveTokens <= req.ContextTokens
	return plan, fits
}

func partialStatus(d *docState, dp DocumentPlan) string {
	switch {
	case dp.Used == 0:
		return fmt.Sprintf("too large: no room left for any of its %d sections", dp.Sections)
	case d.spread:
		return fmt.Sprintf("too large: nothing in the question to search for, so answering from evenly spaced parts (%d of %d sections)", dp.Used, dp.Sections)
	}
	return fmt.Sprintf("too large: answering from the most relevant parts (%d of %d sections)", dp.Used, dp.Sections)
}

// contextLabel writes a context size the way people say it: "8K", "128K",
// "1.5K", "900".
func contextLabel(n int) string {
	switch {
	case n >= 1024 && n%1024 == 0:
		return fmt.Sprintf("%dK", n/1024)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	case n >= 1000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1024), ".0") + "K"
	}
	return fmt.Sprint(n)
}

// mergeChunks joins the chosen chunks, in document order, into excerpts;
// chunks that overlap or touch (a little white space between) become one.
func mergeChunks(chunks []Chunk, selected []int, text string) []excerpt {
	sel := append([]int(nil), selected...)
	sort.Slice(sel, func(a, b int) bool { return chunks[sel[a]].Start < chunks[sel[b]].Start })
	var out []excerpt
	for _, j := range sel {
		c := chunks[j]
		if n := len(out); n > 0 {
			last := &out[n-1]
			if c.Start <= last.end || (c.Start-last.end <= 64 && strings.TrimSpace(text[last.end:c.Start]) == "") {
				if c.End > last.end {
					last.end = c.End
				}
				continue
			}
		}
		out = append(out, excerpt{c.Start, c.End})
	}
	return out
}

// locator turns byte ranges into pages, lines or paragraphs.
type locator struct {
	doc   *documents.Document
	paras []int // paragraph number of each line (non-empty lines counted)
}

func (l *locator) paragraphAt(off int) int {
	d := l.doc
	if l.paras == nil {
		starts := d.LineStarts()
		l.paras = make([]int, len(starts))
		n := 0
		for i, s := range starts {
			e := len(d.Text)
			if i+1 < len(starts) {
				e = starts[i+1]
			}
			if strings.TrimSpace(d.Text[s:e]) != "" {
				n++
			}
			l.paras[i] = n
		}
	}
	line := d.LineAt(off) - 1
	if line < 0 || line >= len(l.paras) {
		return 1
	}
	if l.paras[line] == 0 {
		return 1
	}
	return l.paras[line]
}

func (l *locator) citation(start, end int, whole bool) Citation {
	d := l.doc
	c := Citation{Whole: whole, Start: start, End: end}
	last := end - 1
	if last < start {
		last = start
	}
	var loc string
	switch {
	case len(d.Pages) > 0:
		if whole {
			c.FirstPage, c.LastPage = d.Pages[0].Number, d.Pages[len(d.Pages)-1].Number
		} else {
			c.FirstPage, c.LastPage = d.PageAt(start), d.PageAt(last)
		}
		loc = rangeLabel("page", "pages", c.FirstPage, c.LastPage)
	case d.Kind == documents.KindHTML || d.Kind == documents.KindDOCX:
		c.FirstParagraph, c.LastParagraph = l.paragraphAt(start), l.paragraphAt(last)
		loc = rangeLabel("paragraph", "paragraphs", c.FirstParagraph, c.LastParagraph)
	default:
		c.FirstLine, c.LastLine = d.LineAt(start), d.LineAt(last)
		loc = rangeLabel("line", "lines", c.FirstLine, c.LastLine)
	}
	if whole {
		loc = "whole document, " + loc
	}
	c.Label = loc
	return c
}

func rangeLabel(one, many string, a, b int) string {
	if a == b {
		return fmt.Sprintf("%s %d", one, a)
	}
	return fmt.Sprintf("%s %d–%d", many, a, b)
}
