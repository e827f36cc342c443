package statesvc

import (
	"encoding/binary"
	"fmt"
)

// State key layout
//
//	operator | bucket | state name | user key
//
// encoded as
//
//	[len(operator) : 1 byte][operator][bucket : 2 bytes big-endian]
//	[len(state) : 1 byte][state][user key]
//
// Operator and state names are length-prefixed, so no separator can be
// ambiguous, and the user key is the unprefixed tail. All keys of one bucket
// of one operator share the prefix [len][operator][bucket], so a bucket (and
// a run of consecutive buckets) is one contiguous key range: cheap range
// scans for transfer and range deletes after a migration.

const (
	// MaxNameLen is the longest operator or state name the layout can encode.
	MaxNameLen = 255
	// MaxBuckets is the number of distinct buckets the layout can encode
	// (buckets 0..MaxBuckets-1).
	MaxBuckets = 1 << 16
)

// CheckName reports whether name can be used as an operator or state name in
// a state key. Validate names from configuration with it: the key builders
// panic on names that fail it.
func CheckName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("statesvc: name %.32q... is %d bytes, at most %d allowed", name, len(name), MaxNameLen)
	}
	return nil
}

// CheckBucket reports whether bucket is encodable (0 <= bucket < MaxBuckets).
func CheckBucket(bucket int) error {
	if bucket < 0 || bucket >= MaxBuckets {
		return fmt.Errorf("statesvc: bucket %d out of range [0, %d)", bucket, MaxBuckets)
	}
	return nil
}

// StateKey appends the state key of (operator, bucket, state, userKey) to dst
// and returns the extended slice. It panics if a name is longer than
// MaxNameLen or the bucket is outside [0, MaxBuckets): both are programming or
// configuration errors that CheckName and CheckBucket catch up front.
func StateKey(dst []byte, operator string, bucket int, state string, userKey []byte) []byte {
	mustName(operator)
	mustName(state)
	mustBucket(bucket)
	dst = appendBucketPrefix(dst, operator, bucket)
	dst = append(dst, byte(len(state)))
	dst = append(dst, state...)
	return append(dst, userKey...)
}

// BucketPrefix returns the prefix shared by all state keys of one bucket of
// one operator (every state name, every user key). It panics on invalid
// input like StateKey.
func BucketPrefix(operator string, bucket int) []byte {
	mustName(operator)
	mustBucket(bucket)
	return appendBucketPrefix(make([]byte, 0, 3+len(operator)), operator, bucket)
}

// OperatorPrefix returns the prefix shared by all state keys of one operator.
func OperatorPrefix(operator string) []byte {
	mustName(operator)
	return appendOperator(make([]byte, 0, 1+len(operator)), operator)
}

// BucketRange returns the key range [start, end) holding the state of
// buckets lo..hi-1 of one operator. 0 <= lo <= hi <= MaxBuckets is required
// (it panics otherwise); lo == hi yields an empty range (start == end). end
// is nil only when no finite key bounds the operator's keys from above (an
// operator name of 255 0xff bytes with hi == MaxBuckets); a nil end means
// "to the end of the key space" for Scan and DeleteRange.
func BucketRange(operator string, lo, hi int) (start, end []byte) {
	mustName(operator)
	if lo < 0 || hi > MaxBuckets || lo > hi {
		panic(fmt.Sprintf("statesvc: bucket range [%d, %d) invalid, need 0 <= lo <= hi <= %d", lo, hi, MaxBuckets))
	}
	if lo == hi { // empty: any start == end will do, and never nil
		start = appendBucketPrefix(make([]byte, 0, 3+len(operator)), operator, min(lo, MaxBuckets-1))
		return start, append([]byte(nil), start...)
	}
	start = appendBucketPrefix(make([]byte, 0, 3+len(operator)), operator, lo)
	if hi < MaxBuckets {
		return start, appendBucketPrefix(make([]byte, 0, 3+len(operator)), operator, hi)
	}
	return start, PrefixEnd(OperatorPrefix(operator))
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, or nil when there is none (prefix is empty or all 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ParseStateKey splits a state key built by StateKey. The returned userKey
// aliases k.
func ParseStateKey(k []byte) (operator string, bucket int, state string, userKey []byte, err error) {
	op, bucket, st, userKey, err := SplitStateKey(k)
	if err != nil {
		return "", 0, "", nil, err
	}
	return string(op), bucket, string(st), userKey, nil
}

// SplitStateKey is ParseStateKey without copies: operator, state and
// userKey all alias k, so a loop over many keys (a state chunk of a bulk
// move) allocates nothing per key.
func SplitStateKey(k []byte) (operator []byte, bucket int, state, userKey []byte, err error) {
	rest := k
	if len(rest) < 1 {
		return nil, 0, nil, nil, fmt.Errorf("statesvc: parse state key: empty key")
	}
	n := int(rest[0])
	rest = rest[1:]
	if len(rest) < n+2 {
		return nil, 0, nil, nil, fmt.Errorf("statesvc: parse state key: %d bytes too short for operator of %d bytes and bucket", len(k), n)
	}
	operator = rest[:n]
	bucket = int(binary.BigEndian.Uint16(rest[n:]))
	rest = rest[n+2:]
	if len(rest) < 1 {
		return nil, 0, nil, nil, fmt.Errorf("statesvc: parse state key: missing state name length")
	}
	n = int(rest[0])
	rest = rest[1:]
	if len(rest) < n {
		return nil, 0, nil, nil, fmt.Errorf("statesvc: parse state key: state name of %d bytes truncated to %d", n, len(rest))
	}
	return operator, bucket, rest[:n], rest[n:], nil
}

func appendOperator(dst []byte, operator string) []byte {
	dst = append(dst, byte(len(operator)))
	return append(dst, operator...)
}

func appendBucketPrefix(dst []byte, operator string, bucket int) []byte {
	dst = appendOperator(dst, operator)
	return binary.BigEndian.AppendUint16(dst, uint16(bucket))
}

func mustName(name string) {
	if err := CheckName(name); err != nil {
		panic(err)
	}
}

func mustBucket(bucket int) {
	if err := CheckBucket(bucket); err != nil {
		panic(err)
	}
}
