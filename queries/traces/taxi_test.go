package traces_test

import (
	"fmt"
	"math"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/traces"
)

// cellOf is the DEBS 2015 grid, written out again for the oracle: 500 m
// cells, the first centred at 41.474937 N, 74.913585 W, 300 per side.
func cellOf(lon, lat float64) (string, bool) {
	const dLon, dLat = 0.005986, 0.004491556
	x := int(math.Floor((lon-(-74.913585-dLon/2))/dLon)) + 1
	y := int(math.Floor(((41.474937+dLat/2)-lat)/dLat)) + 1
	return fmt.Sprintf("%d.%d", x, y), x >= 1 && x <= 300 && y >= 1 && y <= 300
}

// taxiOracle is the taxi query recomputed: per route the last 150 trip
// times, "pickup,trip secs,n,median" per trip.
func taxiOracle(t *testing.T, in []traces.Trip) []string {
	last := map[string][]float64{}
	var want []string
	for _, trip := range in {
		from, ok1 := cellOf(trip.PickupLon, trip.PickupLat)
		to, ok2 := cellOf(trip.DropoffLon, trip.DropoffLat)
		if !ok1 || !ok2 {
			t.Fatalf("generated trip %+v leaves the grid", trip)
		}
		route := from + ">" + to
		secs := trip.Dropoff.Unix() - trip.Pickup.Unix()
		w := lastN(last[route], float64(secs), 150)
		last[route] = w
		want = append(want, fmt.Sprintf("%s=%d,%d,%d,%.1f", route, trip.Pickup.Unix(), secs, len(w), medianOf(w)))
	}
	return want
}

// taxiRescale is the operator taxi's rescale tests scale.
var taxiRescale = rescale{op: "movingMedianTripTime", par: map[string]int{"calculateCellId": 2, "movingMedianTripTime": 2}}

func taxiInput(t testing.TB, n int) ([]dataplane.Record, []traces.Trip) {
	g, err := traces.NewTaxiGenerator(control.ProduceRequest{NumKeys: 100, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	trips := make([]traces.Trip, n)
	for i := range trips {
		trips[i] = g.Trip(int64(i))
	}
	return generate(t, traces.Taxi, 100, 5, n), trips
}

func TestTaxiAcrossLazyRescale(t *testing.T) {
	recs, trips := taxiInput(t, 6000)
	res := runRescaled(t, traces.Taxi, taxiRescale, nil, recs)
	compare(t, res, taxiOracle(t, trips))
}

const taxiHeader = "medallion,hack_license,vendor_id,rate_code,store_and_fwd_flag,pickup_datetime,dropoff_datetime,passenger_count,trip_time_in_secs,trip_distance,pickup_longitude,pickup_latitude,dropoff_longitude,dropoff_latitude"

func TestTaxiFromCSV(t *testing.T) {
	_, trips := taxiInput(t, 3000)
	good := make([][]byte, len(trips))
	for i, tr := range trips {
		good[i] = tr.CSV()
	}
	bad := []string{
		"M,H,CMT,1,N,2013-01-01 00:00:00,2013-01-01 00:10:00,1,600,1.5,0.000000,0.000000,-73.98,40.75", // pickup at (0,0): off the grid
		"M,H,CMT,1,N,2013-01-01 00:00:00,2013-01-01 00:10:00,1,600,1.5,-73.98,40.75,-73.98",            // 13 columns
		"M,H,CMT,1,N,yesterday,2013-01-01 00:10:00,1,600,1.5,-73.98,40.75,-73.98,40.75",                // bad time
		"M,H,CMT,1,N,2013-01-01 00:10:00,2013-01-01 00:00:00,1,600,1.5,-73.98,40.75,-73.98,40.75",      // dropoff before pickup
		"M,H,CMT,1,N,2013-01-01 00:00:00,2013-01-01 00:10:00,one,600,1.5,-73.98,40.75,-73.98,40.75",    // passengers
		"M,H,CMT,1,N,2013-01-01 00:00:00,2013-01-01 00:10:00,1,600,far,-73.98,40.75,-73.98,40.75",      // distance
	}
	recs := csvInput(t, traces.Taxi, taxiHeader, good, bad)
	recs, injected := injectBad(recs, []dataplane.Record{{Key: []byte("157.162"), Value: []byte("not,a,trip")}})
	res := run(t, traces.Taxi, map[string]int{"calculateCellId": 2, "movingMedianTripTime": 2}, nil, recs)
	if n := res.Counter("calculateCellId", "malformed_records"); n != uint64(injected) {
		t.Fatalf("calculateCellId counted %d malformed records, want %d", n, injected)
	}
	compare(t, res, taxiOracle(t, trips))
}

func BenchmarkTaxi(b *testing.B) { benchQuery(b, traces.Taxi, 1000, nil) }
