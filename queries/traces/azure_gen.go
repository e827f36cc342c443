package traces

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Azure generator parameters.
const (
	// AzureDefaultSkew is the Zipf exponent over VMs when Skew is 0.
	AzureDefaultSkew = 1.0
	// AzureReadingInterval is the trace's reading period (seconds): the
	// timestamp advances by it once every NumKeys readings.
	AzureReadingInterval = 300
	maxAzureVMs          = produce.MaxZipfKeys
)

// AzureGenerator makes VM CPU readings: the VM of reading n is drawn from
// a Zipf over NumKeys VMs; each VM has its own load level around which its
// readings vary. Reading n depends only on (seed, n).
type AzureGenerator struct {
	vms  keyIndex
	seed int64
	num  int
}

// NewAzureGenerator returns the generator of req (NumKeys VMs, Skew, Seed).
func NewAzureGenerator(req control.ProduceRequest) (*AzureGenerator, error) {
	z, err := traceKeys(Azure, req, AzureDefaultSkew, maxAzureVMs)
	if err != nil {
		return nil, err
	}
	return &AzureGenerator{vms: z, seed: req.Seed, num: req.NumKeys}, nil
}

// AzureVMID is the id of VM index k.
func AzureVMID(k int) string { return fmt.Sprintf("vm%07d", k) }

// Reading is reading n.
func (g *AzureGenerator) Reading(n int64) CPUReading {
	k := g.vms.Index(g.seed, n)
	rng := rand.New(rand.NewPCG(uint64(g.seed)^0xa2e, uint64(n)))
	level := 5 + float64(uint64(k)*2654435761%80) // the VM's usual load, 5–84 %
	avg := clamp(level+rng.NormFloat64()*8, 0.5, 99)
	lo := clamp(avg-rng.Float64()*avg*0.6, 0, avg)
	hi := clamp(avg+rng.Float64()*(100-avg)*0.6, avg, 100)
	return CPUReading{
		Timestamp: n / int64(g.num) * AzureReadingInterval,
		VMID:      AzureVMID(k),
		MinCPU:    round3(lo), MaxCPU: round3(hi), AvgCPU: round3(avg),
	}
}

// Next fills r with reading n keyed by its VM.
func (g *AzureGenerator) Next(n int64, r *dataplane.Record) {
	x := g.Reading(n)
	r.Key = append(r.Key[:0], x.VMID...)
	r.Value = x.CSV()
	r.EventTime = time.Now().UnixNano()
	r.Partition, r.Offset = 0, 0
}

func clamp(v, lo, hi float64) float64 { return math.Min(math.Max(v, lo), hi) }

// round3 keeps three decimals, like the trace's values.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func init() {
	registerTrace(&trace{name: Azure, key: azureKey}, func(req control.ProduceRequest) (produce.Generator, error) {
		return NewAzureGenerator(req)
	})
}
