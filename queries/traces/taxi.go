package traces

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
)

// TaxiListSize is how many of a route's latest trips movingMedianTripTime keeps.
const TaxiListSize = 150

// The grid of the DEBS 2015 taxi challenge: 300×300 cells of 500 m, the
// first centred at 41.474937 N, 74.913585 W; x grows east, y south.
const (
	GridCells    = 300
	cellLonDeg   = 0.005986
	cellLatDeg   = 0.004491556
	gridWestLon  = -74.913585 - cellLonDeg/2
	gridNorthLat = 41.474937 + cellLatDeg/2
)

// TaxiTimeLayout is the layout of the trace's pickup and dropoff times.
const TaxiTimeLayout = "2006-01-02 15:04:05"

// Trip is one line of the NYC taxi trip trace.
type Trip struct {
	Medallion, HackLicense, VendorID string
	RateCode                         int
	StoreAndFwd                      string
	Pickup, Dropoff                  time.Time
	Passengers                       int
	TripSecs                         int64 // the trace's own column; the query uses Dropoff − Pickup
	Distance                         float64
	PickupLon, PickupLat             float64
	DropoffLon, DropoffLat           float64
}

// Cell is a grid cell (1-based; 0 = outside the grid).
type Cell struct{ X, Y int }

func (c Cell) String() string { return fmt.Sprintf("%d.%d", c.X, c.Y) }

// CellOf returns the grid cell of a point; ok is false outside the grid.
func CellOf(lon, lat float64) (c Cell, ok bool) {
	x := int(math.Floor((lon-gridWestLon)/cellLonDeg)) + 1
	y := int(math.Floor((gridNorthLat-lat)/cellLatDeg)) + 1
	if x < 1 || x > GridCells || y < 1 || y > GridCells {
		return Cell{}, false
	}
	return Cell{x, y}, true
}

// Route is the record key of a trip after calculateCellId:
// "<pickup cell>><dropoff cell>".
func Route(from, to Cell) string { return from.String() + ">" + to.String() }

// CSV renders t in the trace's column layout.
func (t Trip) CSV() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s,%s,%s,%d,%s,%s,%s,%d,%d,%s,%s,%s,%s,%s", t.Medallion, t.HackLicense, t.VendorID, t.RateCode, t.StoreAndFwd,
		t.Pickup.UTC().Format(TaxiTimeLayout), t.Dropoff.UTC().Format(TaxiTimeLayout), t.Passengers, t.TripSecs,
		strconv.FormatFloat(t.Distance, 'f', 2, 64),
		strconv.FormatFloat(t.PickupLon, 'f', 6, 64), strconv.FormatFloat(t.PickupLat, 'f', 6, 64),
		strconv.FormatFloat(t.DropoffLon, 'f', 6, 64), strconv.FormatFloat(t.DropoffLat, 'f', 6, 64))
	return b.Bytes()
}

// ParseTrip parses one trace line (not the header).
func ParseTrip(line []byte) (Trip, error) {
	f := bytes.Split(line, []byte(","))
	if len(f) != 14 {
		return Trip{}, malformed("taxi: %d columns, want 14", len(f))
	}
	t := Trip{Medallion: string(f[0]), HackLicense: string(f[1]), VendorID: string(f[2]), StoreAndFwd: string(f[4])}
	var err error
	if len(f[3]) > 0 {
		if t.RateCode, err = strconv.Atoi(string(f[3])); err != nil {
			return t, malformed("taxi: rate code %q is not a whole number", f[3])
		}
	}
	if t.Pickup, err = time.Parse(TaxiTimeLayout, string(f[5])); err != nil {
		return t, malformed("taxi: pickup time %q, want %s", f[5], TaxiTimeLayout)
	}
	if t.Dropoff, err = time.Parse(TaxiTimeLayout, string(f[6])); err != nil {
		return t, malformed("taxi: dropoff time %q, want %s", f[6], TaxiTimeLayout)
	}
	if t.Dropoff.Before(t.Pickup) {
		return t, malformed("taxi: dropoff %s before pickup %s", f[6], f[5])
	}
	if t.Passengers, err = strconv.Atoi(string(f[7])); err != nil {
		return t, malformed("taxi: passenger count %q is not a whole number", f[7])
	}
	if t.TripSecs, err = strconv.ParseInt(string(f[8]), 10, 64); err != nil {
		return t, malformed("taxi: trip time %q is not a whole number", f[8])
	}
	for i, dst := range []*float64{&t.Distance, &t.PickupLon, &t.PickupLat, &t.DropoffLon, &t.DropoffLat} {
		v, err := strconv.ParseFloat(string(f[9+i]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return t, malformed("taxi: column %d %q is not a number", 10+i, f[9+i])
		}
		*dst = v
	}
	return t, nil
}

// cells returns the trip's pickup and dropoff cells, or a malformed error
// when either lies outside the grid.
func (t Trip) cells() (from, to Cell, err error) {
	from, ok1 := CellOf(t.PickupLon, t.PickupLat)
	to, ok2 := CellOf(t.DropoffLon, t.DropoffLat)
	if !ok1 || !ok2 {
		return from, to, malformed("taxi: trip from (%g,%g) to (%g,%g) leaves the grid", t.PickupLon, t.PickupLat, t.DropoffLon, t.DropoffLat)
	}
	return from, to, nil
}

// taxiKey keys a trip line by its pickup cell, so all trips of a route
// share a source partition and stay in order up to movingMedianTripTime.
func taxiKey(line []byte) ([]byte, error) {
	t, err := ParseTrip(line)
	if err != nil {
		return nil, err
	}
	from, _, err := t.cells()
	return []byte(from.String()), err
}

// calculateCellId maps a trip to its route: key = Route, value =
// "pickup unix seconds,trip seconds".
func calculateCellId(r dataplane.Record, emit dataplane.Emit) error {
	t, err := ParseTrip(r.Value)
	if err != nil {
		return err
	}
	from, to, err := t.cells()
	if err != nil {
		return err
	}
	r.Key = []byte(Route(from, to))
	r.Value = fmt.Appendf(nil, "%d,%d", t.Pickup.Unix(), int64(t.Dropoff.Sub(t.Pickup)/time.Second))
	emit(r)
	return nil
}

// movingMedianTripTime keeps the trip times of each route's last
// TaxiListSize trips (job parameter ListLength; list state "trips") and
// emits "pickup,trip seconds,trips,median trip seconds".
func movingMedianTripTime(ctx dataplane.OperatorContext) (func(dataplane.Record, *dataplane.State, dataplane.Emit) error, error) {
	size, err := control.IntParam(ctx.Job, control.ParamListLength, TaxiListSize, 1, control.MaxListSize, "trips")
	if err != nil {
		return nil, err
	}
	warm := warmUpFill(ctx)
	return func(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
		pickup, secs, ok := bytes.Cut(r.Value, []byte(","))
		p, err1 := strconv.ParseInt(string(pickup), 10, 64)
		s, err2 := strconv.ParseInt(string(secs), 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return malformed("taxi: route record %q, want pickup,trip seconds", r.Value)
		}
		var fill func(int) int64
		if warm {
			// Earlier trips of the route, ±25 % of this one's time.
			fill = func(i int) int64 { return s*3/4 + fillerRand(r.Key, i).Int64N(s/2+1) }
		}
		trips, err := pushBounded(st, "trips", r.Key, size, s,
			func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) },
			func(b []byte) (int64, error) {
				if len(b) != 8 {
					return 0, fmt.Errorf("taxi: stored trip of %d bytes, want 8", len(b))
				}
				return int64(binary.LittleEndian.Uint64(b)), nil
			}, fill)
		if err != nil {
			return err
		}
		times := make([]float64, len(trips))
		for i, v := range trips {
			times[i] = float64(v)
		}
		r.Value = fmt.Appendf(nil, "%d,%d,%d,%s", p, s, len(times), strconv.FormatFloat(median(times), 'f', 1, 64))
		emit(r)
		return nil
	}, nil
}

func buildTaxi(b *dataplane.QueryBuilder, src *dataplane.Stream, sink Sink) {
	b.Describe(fmt.Sprintf("NYC taxi trips: grid cells per trip, then per route the median trip time of the last %d trips", TaxiListSize))
	routes := src.Process("calculateCellId", stateless("taxi", calculateCellId), false)
	sink(routes.Process("movingMedianTripTime", keyed("taxi route", []string{"trips"}, movingMedianTripTime), true))
}
