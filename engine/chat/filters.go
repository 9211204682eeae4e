package chat

import (
	"github.com/nikolalohinski/gonja/v2/exec"
)

// chatFilters are the filters that replace or extend gonja's builtins.
func chatFilters() map[string]exec.FilterFunction {
	return map[string]exec.FilterFunction{
		"tojson":   filterToJSON,
		"items":    filterItems,
		"trim":     filterTrim,
		"pyformat": filterPyFormat,
		"pyifelse": filterPyIfElse,
	}
}

// filterTrim is jinja2's trim(value, chars=None): str(value).strip(chars).
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	args, err := pyArgs("trim", params, "chars")
	if err != nil {
		return exec.AsValue(err)
	}
	chars, err := optString("trim", args[0])
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(pyStrip(in.String(), chars, true, true))
}
