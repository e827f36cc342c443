package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// CheckNativeAddr reports whether addr is a usable address of ClickHouse's
// native TCP interface: host:port with a non-empty host and a port in
// 1..65535.
func CheckNativeAddr(addr string) error {
	want := "want host:port of the ClickHouse native TCP interface, e.g. 127.0.0.1:9000"
	if addr == "" {
		return fmt.Errorf("metrics: empty clickhouse native address: %s", want)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse native address %q: %s: %w", addr, want, err)
	}
	if host == "" {
		return fmt.Errorf("metrics: clickhouse native address %q has no host: %s", addr, want)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("metrics: clickhouse native address %q: port %q is not in 1..65535: %s", addr, port, want)
	}
	return nil
}

// native returns the native-protocol connection, opening it on first use:
// a ClickHouse that only inserts never needs the native port.
// A failed open is not remembered, so a server that comes up later is
// reached by the next call.
func (ch *ClickHouse) native() (driver.Conn, error) {
	ch.connMu.Lock()
	defer ch.connMu.Unlock()
	if ch.conn != nil {
		return ch.conn, nil
	}
	if err := CheckNativeAddr(ch.nativeAddr); err != nil {
		return nil, err
	}
	auth := clickhouse.Auth{Database: "default", Username: "default"}
	if ch.base != nil && ch.base.User != nil {
		// The HTTP URL's credentials are the server's, so both interfaces log in alike.
		auth.Username = ch.base.User.Username()
		auth.Password, _ = ch.base.User.Password()
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{ch.nativeAddr},
		Auth:        auth,
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: clickhouse native %s: %w", ch.nativeAddr, err)
	}
	ch.conn = conn
	return conn, nil
}

// closeNative closes the native connection if one was opened.
func (ch *ClickHouse) closeNative() error {
	ch.connMu.Lock()
	defer ch.connMu.Unlock()
	if ch.conn == nil {
		return nil
	}
	err := ch.conn.Close()
	ch.conn = nil
	if err != nil {
		return fmt.Errorf("metrics: closing clickhouse native connection: %w", err)
	}
	return nil
}

// Exec runs a statement that returns no rows (DDL, ALTER, DROP) over the
// native protocol. Errors carry ClickHouse's message.
func (ch *ClickHouse) Exec(ctx context.Context, sql string) error {
	conn, err := ch.native()
	if err != nil {
		return err
	}
	if ch.traceSQL != nil {
		ch.traceSQL(sql)
	}
	if err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("metrics: clickhouse %s: %w", firstLine(sql), err)
	}
	return nil
}

// selectRows runs a SELECT over the native protocol and calls scan for
// each row; scan reads the row with rows.Scan into Go values whose types
// match the columns' (the SQL casts where the server's type could vary).
func (ch *ClickHouse) selectRows(ctx context.Context, sql string, scan func(driver.Rows) error) (err error) {
	conn, err := ch.native()
	if err != nil {
		return err
	}
	if ch.traceSQL != nil {
		ch.traceSQL(sql)
	}
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse %s: %w", firstLine(sql), err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("metrics: clickhouse %s: %w", firstLine(sql), cerr)
		}
	}()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("metrics: clickhouse %s: scanning row: %w", firstLine(sql), err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("metrics: clickhouse %s: %w", firstLine(sql), err)
	}
	return nil
}

// errNoRows is returned by selectOne when the SELECT returned no row.
var errNoRows = errors.New("metrics: query returned no row")

// selectOne runs a SELECT expected to return exactly one row and scans it
// into dest.
func (ch *ClickHouse) selectOne(ctx context.Context, sql string, dest ...any) error {
	n := 0
	err := ch.selectRows(ctx, sql, func(r driver.Rows) error {
		n++
		if n > 1 {
			return fmt.Errorf("more than one row")
		}
		return r.Scan(dest...)
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", errNoRows, firstLine(sql))
	}
	return nil
}
