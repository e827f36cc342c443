package dataplane

import "koala/dataplane/wire"

// Record is one event flowing through a job (see wire.Record). Operators
// see it under this name; the type itself lives in wire so the exchange,
// the codecs and the producer can use it without the runtime.
type Record = wire.Record
