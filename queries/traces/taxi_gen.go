package traces

import (
	"fmt"
	"math/rand/v2"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Taxi generator parameters.
const (
	// TaxiDefaultSkew is the Zipf exponent over routes when Skew is 0: a
	// few Manhattan routes carry most trips.
	TaxiDefaultSkew = 1.0
	// taxiArea is the side (cells) of the square around midtown Manhattan
	// that generated trips start and end in.
	taxiArea      = 20
	taxiAreaX     = 147
	taxiAreaY     = 152
	taxiAreaCells = taxiArea * taxiArea
	// taxiAreaRoutes is every (pickup, dropoff) pair of the area: routes
	// 0 … taxiAreaRoutes−1.
	taxiAreaRoutes = taxiAreaCells * taxiAreaCells
	// taxiWide is the side (cells) of a wider square around the area.
	// Routes from taxiAreaRoutes on (a GB warm-up has millions) start in
	// one of its cells outside the area and end in any of its cells, so
	// they differ from the area's routes and from each other.
	taxiWide        = 60
	taxiWideCells   = taxiWide * taxiWide
	taxiWideOutside = taxiWideCells - taxiAreaCells
	// MaxTaxiRoutes is the largest NumKeys.
	MaxTaxiRoutes = taxiAreaRoutes + taxiWideOutside*taxiWideCells
)

// taxiOutside lists the wide square's cells (indices in it) outside the
// area, in order.
var taxiOutside = func() []int {
	lo := (taxiWide - taxiArea) / 2
	out := make([]int, 0, taxiWideOutside)
	for i := range taxiWideCells {
		if x, y := i%taxiWide, i/taxiWide; x < lo || x >= lo+taxiArea || y < lo || y >= lo+taxiArea {
			out = append(out, i)
		}
	}
	return out
}()

// taxiTraceStart is the pickup time of trip 0.
var taxiTraceStart = time.Date(2013, 1, 1, 0, 0, 0, 0, time.UTC)

// TaxiGenerator makes trips: the route of trip n is drawn from a Zipf
// over NumKeys distinct (pickup cell, dropoff cell) pairs; trip times grow
// with the route's length. Trip n depends only on (seed, n).
type TaxiGenerator struct {
	routes keyIndex
	seed   int64
}

// NewTaxiGenerator returns the generator of req (NumKeys routes, Skew, Seed).
func NewTaxiGenerator(req control.ProduceRequest) (*TaxiGenerator, error) {
	z, err := traceKeys(Taxi, req, TaxiDefaultSkew, MaxTaxiRoutes)
	if err != nil {
		return nil, err
	}
	return &TaxiGenerator{routes: z, seed: req.Seed}, nil
}

// TaxiRouteCells returns the pickup and dropoff cells of route index k
// (distinct for every k below MaxTaxiRoutes).
func TaxiRouteCells(k int) (from, to Cell) {
	if k >= taxiAreaRoutes {
		k -= taxiAreaRoutes
		p, q := k%taxiWideOutside, k/taxiWideOutside
		d := (q + 7*p) % taxiWideCells
		lo := (taxiWide - taxiArea) / 2
		cell := func(i int) Cell { return Cell{X: taxiAreaX - lo + i%taxiWide, Y: taxiAreaY - lo + i/taxiWide} }
		return cell(taxiOutside[p]), cell(d)
	}
	p, q := k%taxiAreaCells, k/taxiAreaCells
	d := (q + 7*p) % taxiAreaCells
	cell := func(i int) Cell { return Cell{X: taxiAreaX + i%taxiArea, Y: taxiAreaY + i/taxiArea} }
	return cell(p), cell(d)
}

// point is a point well inside cell c (u, v in [0,1)).
func point(c Cell, u, v float64) (lon, lat float64) {
	lon = gridWestLon + (float64(c.X-1)+0.1+0.8*u)*cellLonDeg
	lat = gridNorthLat - (float64(c.Y-1)+0.1+0.8*v)*cellLatDeg
	return lon, lat
}

// Trip is trip n.
func (g *TaxiGenerator) Trip(n int64) Trip {
	k := g.routes.Index(g.seed, n)
	from, to := TaxiRouteCells(k)
	rng := rand.New(rand.NewPCG(uint64(g.seed)^0x7a61, uint64(n)))
	cells := abs(from.X-to.X) + abs(from.Y-to.Y)
	secs := int64(120 + cells*90 + rng.IntN(240))
	pickup := taxiTraceStart.Add(time.Duration(n) * 2 * time.Second)
	t := Trip{
		Medallion:   fmt.Sprintf("%016X%016X", rng.Uint64(), uint64(k)),
		HackLicense: fmt.Sprintf("%016X%016X", rng.Uint64(), rng.Uint64()),
		VendorID:    []string{"CMT", "VTS"}[rng.IntN(2)],
		RateCode:    1,
		StoreAndFwd: []string{"N", ""}[rng.IntN(2)],
		Pickup:      pickup,
		Dropoff:     pickup.Add(time.Duration(secs) * time.Second),
		Passengers:  1 + rng.IntN(6),
		TripSecs:    secs,
		Distance:    float64(int((0.3+float64(cells)*0.31*(0.9+0.2*rng.Float64()))*100)) / 100,
	}
	t.PickupLon, t.PickupLat = point(from, rng.Float64(), rng.Float64())
	t.DropoffLon, t.DropoffLat = point(to, rng.Float64(), rng.Float64())
	return t
}

// Next fills r with trip n keyed by its pickup cell.
func (g *TaxiGenerator) Next(n int64, r *dataplane.Record) {
	t := g.Trip(n)
	from, _ := CellOf(t.PickupLon, t.PickupLat)
	r.Key = append(r.Key[:0], from.String()...)
	r.Value = t.CSV()
	r.EventTime = time.Now().UnixNano()
	r.Partition, r.Offset = 0, 0
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func init() {
	registerTrace(&trace{name: Taxi, header: true, key: taxiKey}, func(req control.ProduceRequest) (produce.Generator, error) {
		return NewTaxiGenerator(req)
	})
}
