package estimate

import (
	"fmt"
	"strings"
)

// NotFitError is returned by Check (and the loader, before any large
// allocation) when a configuration does not fit its budget.
type NotFitError struct {
	Estimate *Estimate
	Budget   Budget
	Advice   []string
}

func (e *NotFitError) Error() string {
	est := e.Estimate
	var b strings.Builder
	sim := ""
	if e.Budget.Simulated {
		sim = " (simulated)"
	}
	fmt.Fprintf(&b, "%s does not fit: %s at --ctx %d with %s KV needs %s, the budget is %s%s\n",
		est.Model, est.Backend, est.Ctx, est.KVType, Human(est.Total), Human(est.Budget), sim)
	approx := ""
	if !est.WeightsExact {
		approx = " (approximate)"
	}

	fmt.Fprintf(&b, "  weights %s%s + KV %s + scratch %s + overhead %s", Human(est.Weights), approx, Human(est.KV), Human(est.Scratch), Human(est.Overhead))
	if r := est.ReadPerToken(); r != "" {
		// All the weights are resident; the read share sets the speed, not the fit.
		fmt.Fprintf(&b, "\n  the weights are all resident; %s", r)
	}
	for _, a := range e.Advice {
		b.WriteString("\n  - " + a)
	}
	return b.String()
}

// Check evaluates d under o against b and returns a *NotFitError, carrying
// the estimate and the advice, when it does not fit. A tight fit is not an
// error; the estimate says so.
func Check(d Desc, o Options, b Budget) (*Estimate, error) {
	e, err := Evaluate(d, o, b.Bytes)
	if err != nil {
		return nil, err
	}
	if e.Verdict != WillNotFit {
		return e, nil
	}
	adv, err := Advise(d, o, b)
	if err != nil {
		return nil, err
	}
	return e, &NotFitError{Estimate: e, Budget: b, Advice: adv}
}
