package nexmark

// Query results, binary layout version 1
//
// What the queries emit — to their sinks, and between their own operators
// (q3's people into the join, q8's pairs into "q8-result") — is binary in
// the layout of codec.go: a tag, then the fields below in order. Each
// result type has one encoder (append…) and one decoder (Decode…), which
// the oracle tests use too.
//
//	kind  tag   fields
//	5     0x95  q2: auction, price
//	6     0x96  q3: name, city, state, auction
//	7     0x97  q4: category, average (float), closed
//	8     0x98  q6: seller, average (float), kept, closed
//	9     0x99  q6 modified: seller, average (float)
//	10    0x9a  q7: auction, bidder, price, windowEnd
//	11    0x9b  q8: id, name, windowStart, auction
//
// q1 emits bids, in the bid layout of codec.go.

func (v Q2Result) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ2Result))
	dst = appendInt(dst, v.Auction)
	return appendInt(dst, v.Price)
}

// DecodeQ2Result reads a q2 output value.
func DecodeQ2Result(data []byte) (Q2Result, error) {
	r := newReader(data, kindQ2Result)
	v := Q2Result{Auction: r.int("auction"), Price: r.int("price")}
	return v, r.done()
}

func (v Q3Result) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ3Result))
	dst = appendString(dst, v.Name)
	dst = appendString(dst, v.City)
	dst = appendString(dst, v.State)
	return appendInt(dst, v.Auction)
}

// DecodeQ3Result reads a q3 output value (or a person on its way into
// q3's join: Auction 0).
func DecodeQ3Result(data []byte) (Q3Result, error) {
	v, r := readQ3Result(data)
	return v, r.done()
}

func readQ3Result(data []byte) (Q3Result, reader) {
	r := newReader(data, kindQ3Result)
	return Q3Result{Name: r.str("name"), City: r.str("city"), State: r.str("state"), Auction: r.int("auction")}, r
}

// decodeQ3Person reads a q3-persons value: a Q3Result, then the person's
// pad, which the join does not need.
func decodeQ3Person(data []byte) (Q3Result, error) {
	v, r := readQ3Result(data)
	return v, r.err
}

func (v Q4Result) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ4Result))
	dst = appendInt(dst, v.Category)
	dst = appendFloat(dst, v.Average)
	return appendInt(dst, v.Closed)
}

// DecodeQ4Result reads a q4 output value.
func DecodeQ4Result(data []byte) (Q4Result, error) {
	r := newReader(data, kindQ4Result)
	v := Q4Result{Category: r.int("category"), Average: r.float("average"), Closed: r.int("closed")}
	return v, r.done()
}

func (v Q6Result) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ6Result))
	dst = appendInt(dst, v.Seller)
	dst = appendFloat(dst, v.Average)
	dst = appendInt(dst, int64(v.Kept))
	return appendInt(dst, v.Closed)
}

// DecodeQ6Result reads a q6* output value.
func DecodeQ6Result(data []byte) (Q6Result, error) {
	r := newReader(data, kindQ6Result)
	v := Q6Result{Seller: r.int("seller"), Average: r.float("average"), Kept: int(r.int("kept")), Closed: r.int("closed")}
	return v, r.done()
}

func (v Q6ModResult) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ6ModResult))
	dst = appendInt(dst, v.Seller)
	return appendFloat(dst, v.Average)
}

// DecodeQ6ModResult reads an output value of q6 modified.
func DecodeQ6ModResult(data []byte) (Q6ModResult, error) {
	r := newReader(data, kindQ6ModResult)
	v := Q6ModResult{Seller: r.int("seller"), Average: r.float("average")}
	return v, r.done()
}

func (v Q7Result) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ7Result))
	dst = appendInt(dst, v.Auction)
	dst = appendInt(dst, v.Bidder)
	dst = appendInt(dst, v.Price)
	return appendInt(dst, v.WindowEnd)
}

// DecodeQ7Result reads a q7 output value.
func DecodeQ7Result(data []byte) (Q7Result, error) {
	r := newReader(data, kindQ7Result)
	v := Q7Result{Auction: r.int("auction"), Bidder: r.int("bidder"), Price: r.int("price"), WindowEnd: r.int("windowEnd")}
	return v, r.done()
}

func (v Q8Result) appendBinary(dst []byte) []byte {
	dst = append(dst, tagOf(kindQ8Result))
	dst = appendInt(dst, v.ID)
	dst = appendString(dst, v.Name)
	dst = appendInt(dst, v.WindowStart)
	return appendInt(dst, v.Auction)
}

// DecodeQ8Result reads a q8 output value (or a joined pair on its way into
// "q8-result": WindowStart 0).
func DecodeQ8Result(data []byte) (Q8Result, error) {
	r := newReader(data, kindQ8Result)
	v := Q8Result{ID: r.int("id"), Name: r.str("name"), WindowStart: r.int("windowStart"), Auction: r.int("auction")}
	return v, r.done()
}
