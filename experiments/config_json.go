package experiments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// objectMembers decodes a JSON object into its members in source order,
// keeping repeated names, and rejects anything after the closing brace.
func objectMembers(data []byte) ([]member, error) {
	if k := kindOf(data); k != "object" {
		if k == "" {
			return nil, errors.New("empty file: expected a JSON object")
		}
		if !json.Valid(data) {
			return nil, syntaxError(data)
		}
		return nil, fmt.Errorf("expected a JSON object at the top level, got %s", k)
	}
	if !json.Valid(data) {
		return nil, syntaxError(data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, member{name: tok.(string), raw: raw})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level object")
	}
	return out, nil
}

// syntaxError locates a JSON syntax error by line and column.
func syntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		before := data[:min(int(se.Offset), len(data))]
		line := bytes.Count(before, []byte("\n")) + 1
		col := len(before) - 1 - bytes.LastIndexByte(before, '\n') // the offending byte, 1-based
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, se)
	}
	if err == nil {
		return errors.New("invalid JSON")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// kindOf names the JSON type of raw ("" when raw is blank).
func kindOf(raw []byte) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return ""
	}
	switch s[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// suggest renders ` (did you mean "X"?)` for the known name nearest to name
// (case-insensitive Levenshtein distance), when it is close enough.
func suggest(name string, known []string) string {
	best, bestD := "", math.MaxInt
	for _, k := range known {
		if d := levenshtein(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(2, len([]rune(name))/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// withParallelismGuess adds "<Prefix>Parallelism" to the candidates when name
// looks like a misspelt per-operator parallelism field.
func withParallelismGuess(name string, known []string) []string {
	i := strings.Index(strings.ToLower(name), "paral")
	if i <= 0 {
		return known
	}
	return append(slices.Clone(known), name[:i]+"Parallelism")
}

// levenshtein is the edit distance between a and b (insertions, deletions
// and substitutions of runes, each costing 1).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
