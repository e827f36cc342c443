package nexmark

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Generator constants, as in the Nexmark reference generator.
const (
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	totalProportion   = PersonProportion + AuctionProportion + BidProportion

	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	NumCategories   = 5

	personIDLead    = 10 // bids and auctions may name people slightly in the future
	auctionIDLead   = 10
	hotSellerRatio  = 100
	hotAuctionRatio = 100
	hotBidderRatio  = 100
)

// Config shapes the generated stream. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Seed int64
	// NumActivePeople bounds the people bids and auctions refer to.
	NumActivePeople int
	// InFlightAuctions bounds the auctions cold bids refer to.
	InFlightAuctions int
	// Hot ratios: 1 in N auctions (bids) goes to a cold seller (auction,
	// bidder); the other N−1 go to the hot one of the current batch.
	HotSellersRatio, HotAuctionRatio, HotBiddersRatio int
	// Average encoded sizes (bytes); events are padded with "extra".
	AvgPersonBytes, AvgAuctionBytes, AvgBidBytes int
	// OutputEventNumber is the position in the output stream of Next(0):
	// the resume point after a warm-up.
	OutputEventNumber int64
	// Kinds restricts the stream to these kinds ("person", "auction",
	// "bid"); empty means all. Next(n) is then the n-th event of those
	// kinds, with the event number and event time it has in the full
	// stream. "closedauction" alone selects the closed-auction stream
	// instead (generator_closed.go).
	Kinds []string
	// BaseTime is the event time of event 0 (unix ns) and InterEventNanos
	// the event-time distance between events. BaseTime 0 stamps every event
	// with the wall clock when it is generated instead.
	BaseTime        int64
	InterEventNanos int64
	// AuctionLength is how long an auction stays open (event time;
	// ClosingAuctionLength by default when Sellers is set).
	AuctionLength time.Duration
	// Sellers, when set, makes a closing-auction stream (see
	// generator_sellers.go): SellersSequential, SellersUniform or
	// SellersZipf; Skew is the exponent of SellersZipf.
	Sellers string
	Skew    float64
	// HotSellerRatio, HotSellerRange and ExtraPayloadSize shape the
	// closed-auction stream (Kinds ["ClosedAuction"], see
	// generator_closed.go) with the artifact's NexmarkSourceConfig knobs:
	// HotSellerRatio (0 to 1) of the closed auctions go to the current hot
	// seller, one of every HotSellerRange people (default
	// DefaultHotSellerRange), and every record carries ExtraPayloadSize
	// bytes of padding. They are not the reference stream's
	// HotSellersRatio, which counts 1 in N.
	HotSellerRatio   float64
	HotSellerRange   int
	ExtraPayloadSize int
	// Encoding is the records' wire form: Binary (the default, also for
	// "") or JSON (codec.go). The events are the same in both: padding is
	// sized against the JSON form.
	Encoding Encoding
}

// DefaultConfig is the reference generator's configuration.
func DefaultConfig() Config {
	return Config{
		NumActivePeople: 1000, InFlightAuctions: 100,
		HotSellersRatio: 4, HotAuctionRatio: 2, HotBiddersRatio: 4,
		AvgPersonBytes: 200, AvgAuctionBytes: 500, AvgBidBytes: 100,
		InterEventNanos: int64(100 * time.Microsecond), AuctionLength: 10 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.NumActivePeople, d.NumActivePeople)
	set(&c.InFlightAuctions, d.InFlightAuctions)
	set(&c.HotSellersRatio, d.HotSellersRatio)
	set(&c.HotAuctionRatio, d.HotAuctionRatio)
	set(&c.HotBiddersRatio, d.HotBiddersRatio)
	set(&c.AvgPersonBytes, d.AvgPersonBytes)
	set(&c.AvgAuctionBytes, d.AvgAuctionBytes)
	set(&c.AvgBidBytes, d.AvgBidBytes)
	if c.InterEventNanos <= 0 {
		c.InterEventNanos = d.InterEventNanos
	}
	if c.HotSellerRange <= 0 {
		c.HotSellerRange = DefaultHotSellerRange
	}
	if c.Encoding == "" {
		c.Encoding = Binary
	}
	if c.AuctionLength <= 0 {
		c.AuctionLength = d.AuctionLength
		if c.Sellers != "" {
			c.AuctionLength = ClosingAuctionLength
		}
	}
	return c
}

// Generator makes the Nexmark stream; event n depends only on the config
// and n, so any range can be regenerated (oracles, parallel producers).
type Generator struct {
	cfg Config
	// offsets are the positions within one proportion cycle of the
	// selected kinds (all of them without Kinds).
	offsets []int64
	// seller picks auction k's seller index of a closing-auction stream
	// or of the closed-auction stream (nil: their default draw).
	seller sellerPicker
	// closed marks the closed-auction stream; extra is its records' pad.
	closed bool
	extra  string
	// scratch is where Next encodes; each record's value is a copy of
	// exactly its size.
	scratch []byte
}

// NewGenerator returns a generator for cfg; unknown Kinds and knobs out of
// range are errors naming them.
func NewGenerator(cfg Config) (*Generator, error) {
	enc, err := ParseEncoding(string(cfg.Encoding))
	if err != nil {
		return nil, err
	}
	cfg.Encoding = enc
	g := &Generator{cfg: cfg.withDefaults()}
	if closed, err := closedAuctionsOnly(cfg); err != nil || closed {
		if err != nil {
			return nil, err
		}
		return g, g.initClosedAuctions(cfg)
	}
	if err := rejectClosedAuctionKnobs(cfg); err != nil {
		return nil, err
	}
	if cfg.Sellers != "" {
		if len(cfg.Kinds) > 0 {
			return nil, fmt.Errorf("nexmark sellers %q makes its own auction/bid stream; event types %v cannot select from it", cfg.Sellers, cfg.Kinds)
		}
		var err error
		if g.seller, err = newSellerPicker(g.cfg); err != nil {
			return nil, err
		}
	}
	want := map[string]bool{}
	for _, k := range cfg.Kinds {
		switch kk := strings.ToLower(k); kk {
		case "person", "auction", "bid":
			want[kk] = true
		default:
			return nil, fmt.Errorf("nexmark event type %q: allowed are %s", k, allowedKinds)
		}
	}
	for off := int64(0); off < totalProportion; off++ {
		if len(want) == 0 || want[KindOf(off)] {
			g.offsets = append(g.offsets, off)
		}
	}
	return g, nil
}

// EventNumber is the event number (in the full stream) of Next(n).
func (g *Generator) EventNumber(n int64) int64 {
	m := g.cfg.OutputEventNumber + n
	if g.closed { // a stream of its own: closed auction m is event m
		return m
	}
	k := int64(len(g.offsets))
	return m/k*totalProportion + g.offsets[m%k]
}

// Config returns the generator's configuration with defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// KindOf says which kind event number e is.
func KindOf(e int64) string {
	switch off := e % totalProportion; {
	case off < PersonProportion:
		return "person"
	case off < PersonProportion+AuctionProportion:
		return "auction"
	}
	return "bid"
}

// lastBase0PersonID is the id (from 0) of the last person created at or
// before event e.
func lastBase0PersonID(e int64) int64 {
	epoch, off := e/totalProportion, e%totalProportion
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastBase0AuctionID is the id (from 0) of the last auction created at or
// before event e.
func lastBase0AuctionID(e int64) int64 {
	epoch, off := e/totalProportion, e%totalProportion
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return max(0, epoch*AuctionProportion+off)
}

func (g *Generator) nextBase0PersonID(e int64, rng *rand.Rand) int64 {
	numPeople := lastBase0PersonID(e) + 1
	active := min(numPeople, int64(g.cfg.NumActivePeople))
	return numPeople - active + rng.Int64N(active+personIDLead)
}

func (g *Generator) nextBase0AuctionID(e int64, rng *rand.Rand) int64 {
	maxAuction := lastBase0AuctionID(e)
	minAuction := max(maxAuction-int64(g.cfg.InFlightAuctions), 0)
	return minAuction + rng.Int64N(maxAuction-minAuction+1+auctionIDLead)
}

func nextPrice(rng *rand.Rand) int64 {
	return int64(math.Round(math.Pow(10, rng.Float64()*6) * 100))
}

var (
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	channels   = []string{"Google", "Facebook", "Baidu", "Apple"}
)

const letters = "abcdefghijklmnopqrstuvwxyz"

// randString draws n lowercase letters, lettersPerDraw from each 64-bit
// draw: a letter is the high word of w×26 and the low word carries the
// rest of w on to the next letter (multiply-shift, as IntN does for one
// value). Ten letters use 47 of the 64 bits, so each is uniform to within
// 26^10/2^64 (< 10⁻⁵). One IntN per letter made the names, descriptions
// and padding of people and auctions most of a Nexmark producer's CPU: a
// fifth of a q3 worker that also ran a join, on a 2-core machine
// (BenchmarkGeneratorPersonsAuctions).
func randString(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := 0; i < n; i += lettersPerDraw {
		w := rng.Uint64()
		for j := range b[i:min(i+lettersPerDraw, n)] {
			hi, lo := bits.Mul64(w, uint64(len(letters)))
			b[i+j] = letters[hi]
			w = lo
		}
	}
	return string(b)
}

// lettersPerDraw is how many letters randString takes from one draw.
const lettersPerDraw = 10

// Timestamp is the event time of event number e (relative numbering of
// Next: n = e − OutputEventNumber) when BaseTime is set.
func (g *Generator) Timestamp(e int64) int64 { return g.cfg.BaseTime + e*g.cfg.InterEventNanos }

// Event builds event number e (absolute: OutputEventNumber is not added)
// stamped with event time ts (unix ns).
func (g *Generator) Event(e, ts int64) Event {
	if g.closed {
		return Event{ClosedAuction: g.closedAuction(e, ts)}
	}
	if g.seller != nil {
		return g.closingEvent(e, ts)
	}
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Seed), uint64(e)))
	ms := ts / int64(time.Millisecond)
	switch KindOf(e) {
	case "person":
		p := &Person{
			ID:   lastBase0PersonID(e) + FirstPersonID,
			Name: firstNames[rng.IntN(len(firstNames))] + " " + lastNames[rng.IntN(len(lastNames))],
			City: usCities[rng.IntN(len(usCities))], State: usStates[rng.IntN(len(usStates))],
			CreditCard: fmt.Sprintf("%04d %04d %04d %04d", rng.IntN(10000), rng.IntN(10000), rng.IntN(10000), rng.IntN(10000)),
			DateTime:   ms,
		}
		p.EmailAddress = randString(rng, 7) + "@" + randString(rng, 5) + ".com"
		p.Extra = pad(rng, g.cfg.AvgPersonBytes, Event{Person: p})
		return Event{Person: p}
	case "auction":
		var seller int64
		if rng.IntN(g.cfg.HotSellersRatio) > 0 {
			seller = (lastBase0PersonID(e) / hotSellerRatio) * hotSellerRatio
		} else {
			seller = g.nextBase0PersonID(e, rng)
		}
		initial := nextPrice(rng)
		a := &Auction{
			ID: lastBase0AuctionID(e) + FirstAuctionID, ItemName: randString(rng, 20), Description: randString(rng, 100),
			InitialBid: initial, Reserve: initial + nextPrice(rng), DateTime: ms,
			Expires: ms + g.cfg.AuctionLength.Milliseconds(), Seller: seller + FirstPersonID,
			Category: FirstCategoryID + int64(rng.IntN(NumCategories)),
		}
		a.Extra = pad(rng, g.cfg.AvgAuctionBytes, Event{Auction: a})
		return Event{Auction: a}
	}
	var auction, bidder int64
	if rng.IntN(g.cfg.HotAuctionRatio) > 0 {
		auction = (lastBase0AuctionID(e) / hotAuctionRatio) * hotAuctionRatio
	} else {
		auction = g.nextBase0AuctionID(e, rng)
	}
	if rng.IntN(g.cfg.HotBiddersRatio) > 0 {
		bidder = (lastBase0PersonID(e)/hotBidderRatio)*hotBidderRatio + 1
	} else {
		bidder = g.nextBase0PersonID(e, rng)
	}
	b := &Bid{
		Auction: auction + FirstAuctionID, Bidder: bidder + FirstPersonID, Price: nextPrice(rng),
		Channel: channels[rng.IntN(len(channels))], URL: "n.io/" + randString(rng, 4), DateTime: ms,
	}
	b.Extra = pad(rng, g.cfg.AvgBidBytes, Event{Bid: b})
	return Event{Bid: b}
}

// pad returns filler that brings e's JSON form to about avg bytes (±10 %):
// the reference generator's event sizes. The binary form carries the same
// filler, so a padded event is the same in both encodings.
func pad(rng *rand.Rand, avg int, e Event) string {
	target := avg + rng.IntN(avg/5+1) - avg/10
	if n := target - jsonLen(e) - len(`,"extra":""`); n > 0 {
		return randString(rng, n)
	}
	return ""
}

// Next fills r with event n of the stream: key = event number (the seller
// for closed auctions, which the query is keyed by), value = the event in
// the config's encoding (AppendEvent), event time from the config (or the
// wall clock). Like every produce.Generator, one goroutine at a time.
func (g *Generator) Next(n int64, r *dataplane.Record) {
	e := g.EventNumber(n)
	ts := time.Now().UnixNano()
	if g.cfg.BaseTime != 0 {
		ts = g.Timestamp(e)
	}
	ev := g.Event(e, ts)
	var err error
	if g.scratch, err = AppendEvent(g.scratch[:0], ev, g.cfg.Encoding); err != nil {
		panic(err) // one kind set, encoding checked by NewGenerator
	}
	data := bytes.Clone(g.scratch)
	if ev.ClosedAuction != nil {
		r.Key = strconv.AppendInt(r.Key[:0], ev.ClosedAuction.Seller, 10)
	} else {
		r.Key = strconv.AppendInt(r.Key[:0], e, 10)
	}
	r.Value = data
	r.EventTime = ts
	r.Partition, r.Offset = 0, 0
}

// GeneratorName is the name `koala produce` and experiment producers use.
const GeneratorName = "nexmark"

func init() {
	if err := produce.RegisterGenerator(GeneratorName, func(req control.ProduceRequest) (produce.Generator, error) {
		return NewGenerator(ConfigOf(req))
	}); err != nil {
		panic(err)
	}
}

// ConfigOf is the generator configuration a produce request asks for:
// NumKeys bounds the active people unless the Nexmark source config says
// otherwise.
func ConfigOf(req control.ProduceRequest) Config {
	cfg := DefaultConfig()
	cfg.Seed = req.Seed
	if req.NumKeys > 0 {
		cfg.NumActivePeople = req.NumKeys
	}
	if n := req.Nexmark; n != nil {
		if n.NumActivePeople > 0 {
			cfg.NumActivePeople = n.NumActivePeople
		}
		if n.HotSellersRatio > 0 {
			cfg.HotSellersRatio = n.HotSellersRatio
		}
		if n.HotAuctionsRatio > 0 {
			cfg.HotAuctionRatio = n.HotAuctionsRatio
		}
		if n.HotBiddersRatio > 0 {
			cfg.HotBiddersRatio = n.HotBiddersRatio
		}
		cfg.OutputEventNumber = n.OutputEventNumber
		cfg.Kinds = n.EventTypes
		if n.Sellers != "" {
			cfg.Sellers, cfg.Skew = n.Sellers, req.Skew
		}
		cfg.HotSellerRatio, cfg.HotSellerRange, cfg.ExtraPayloadSize = n.HotSellerRatio, n.HotSellerRange, n.ExtraPayloadSize
		cfg.Encoding = Encoding(n.Encoding)
	}
	return cfg
}
