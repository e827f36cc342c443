package dataplane

import "fmt"

// State is one batch's view of keyed state. Values returned by Get must not
// be modified (they may be the store's own); Put takes ownership of value
// (the operator does not modify it afterwards).
//
// Layout: the batch's distinct keys are numbered in order of first sight
// (index), and each key has one slot per declared state name, so Get and
// Put cost one lookup of the user key and no allocation, and the runtime
// finds what to write by walking the slots instead of a second map.
type State struct {
	names []string
	index map[string]int // user key → key number
	keys  [][]byte       // by key number
	slots []stateSlot    // key number × len(names) + state index
}

// stateSlot is one (key, state name) value of a batch.
type stateSlot struct {
	value   []byte
	skey    []byte // the store key, once built (loaded slots)
	dirty   bool   // Put or Delete by the operator
	owned   bool   // value given up whole by the operator (PutOwned)
	fetched bool   // taken from another task: written here even unchanged
	absent  bool   // read from the local store, which did not hold it
	stored  bool   // read from the local store, which held it
}

// newState makes a State for about n keys.
func newState(names []string, n int) *State {
	return &State{names: names, index: make(map[string]int, n), keys: make([][]byte, 0, n), slots: make([]stateSlot, 0, n*len(names))}
}

// reset empties s for the next batch, keeping its memory.
func (s *State) reset() {
	clear(s.index)
	clear(s.keys)
	s.keys = s.keys[:0]
	clear(s.slots)
	s.slots = s.slots[:0]
}

// addKey returns key's number, adding key (not copied: it must stay
// unchanged for the batch) when it is new.
func (s *State) addKey(key []byte) int {
	if ki, ok := s.index[string(key)]; ok {
		return ki
	}
	ki := len(s.keys)
	s.index[string(key)] = ki
	s.keys = append(s.keys, key)
	for range s.names {
		s.slots = append(s.slots, stateSlot{})
	}
	return ki
}

func (s *State) stateIndex(state string) int {
	for i, n := range s.names {
		if n == state {
			return i
		}
	}
	panic(fmt.Sprintf("state %q is not declared by the operator (declared: %v)", state, s.names))
}

// slotOf is the slot of (state index, key number).
func (s *State) slotOf(si, ki int) *stateSlot { return &s.slots[ki*len(s.names)+si] }

// Get returns the value of state for key, or nil.
func (s *State) Get(state string, key []byte) []byte {
	si := s.stateIndex(state)
	ki, ok := s.index[string(key)]
	if !ok {
		return nil
	}
	return s.slotOf(si, ki).value
}

// Put sets the value of state for key.
func (s *State) Put(state string, key []byte, value []byte) { s.put(state, key, value, false) }

// PutOwned is Put for a value the operator made for this write and gives
// up whole: not a slice of a record, of another value or of a buffer it
// keeps. The store may then keep value itself instead of a copy of it (a
// Pebble store's value cache does), which saves a copy per write of large
// values; a slice of a larger buffer would keep all of that buffer alive.
func (s *State) PutOwned(state string, key []byte, value []byte) {
	s.put(state, key, value, value != nil)
}

func (s *State) put(state string, key, value []byte, owned bool) {
	si := s.stateIndex(state)
	ki, ok := s.index[string(key)]
	if !ok { // a key not in the batch: the caller's slice may change, copy it
		ki = s.addKey(append([]byte(nil), key...))
	}
	sl := s.slotOf(si, ki)
	sl.value, sl.dirty, sl.owned = value, true, owned
}

// Delete removes the value of state for key.
func (s *State) Delete(state string, key []byte) { s.Put(state, key, nil) }

// isDirty says whether the operator wrote state for key (tests).
func (s *State) isDirty(state string, key []byte) bool {
	ki, ok := s.index[string(key)]
	return ok && s.slotOf(s.stateIndex(state), ki).dirty
}

// setFetched installs a value taken from another task for slot (state
// index byte + user key, as fetchKeys returns them).
func (s *State) setFetched(slot string, v []byte) {
	sl := s.slotOf(int(slot[0]), s.addKey([]byte(slot[1:])))
	sl.value, sl.fetched = v, true
}

// written calls fn for every slot to write back: the operator's changes and
// fetched values.
func (s *State) written(fn func(si int, key []byte, sl *stateSlot)) {
	n := len(s.names)
	for i := range s.slots {
		if sl := &s.slots[i]; sl.dirty || sl.fetched {
			fn(i%n, s.keys[i/n], sl)
		}
	}
}
