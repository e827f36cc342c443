package ui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where `koala ui` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8280"

// Config configures a Server. Workers and Metrics may each be nil: the
// view then shows what the other one knows.
type Config struct {
	Workers Workers
	Metrics Metrics
	// TemporalUI is the Temporal web UI's base URL for the links to
	// workflows ("" leaves them out), Namespace their namespace (default
	// "default").
	TemporalUI string
	Namespace  string
	// Window is how far back the charts reach (default 2 min); Recent how
	// lately a task must have written a row to count when no worker
	// answers (default 5 s); RecentJobs how lately a job must have
	// written one to be listed (default 1 h).
	Window, Recent, RecentJobs time.Duration
	// Quiet is how long after its last step ended a reconfiguration
	// counts as done (default 3 s, see decideStatus).
	Quiet time.Duration
	// StatusTimeout bounds one worker's status request (default 2 s).
	StatusTimeout time.Duration
	Now           func() time.Time
	Log           *slog.Logger
}

// Server serves the pages, the JSON endpoints and the assets.
type Server struct {
	cfg  Config
	tmpl *template.Template
	mux  *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// NewServer returns a server of cfg with its defaults filled in.
func NewServer(cfg Config) (*Server, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Window, 2*time.Minute)
	def(&cfg.Recent, 5*time.Second)
	def(&cfg.RecentJobs, time.Hour)
	def(&cfg.Quiet, 3*time.Second)
	def(&cfg.StatusTimeout, 2*time.Second)
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui templates: %w", err)
	}
	s := &Server{cfg: cfg, tmpl: tmpl, mux: http.NewServeMux()}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, fmt.Errorf("ui assets: %w", err)
	}
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /live", s.indexLive)
	s.mux.HandleFunc("GET /jobs/{id}", s.jobPage)
	s.mux.HandleFunc("GET /jobs/{id}/live", s.jobLive)
	s.mux.HandleFunc("GET /api/jobs", s.apiJobs)
	s.mux.HandleFunc("GET /api/jobs/{id}", s.apiJob)
	s.mux.HandleFunc("GET /api/jobs/{id}/reconfigs", s.apiReconfigs)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Serve serves on ln until ctx ends, then shuts down within 5 s.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("ui: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("ui: shut down: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "index", s.jobs(r.Context()))
}

func (s *Server) indexLive(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "jobs", s.jobs(r.Context()))
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) { s.renderJob(w, r, "job") }

func (s *Server) jobLive(w http.ResponseWriter, r *http.Request) { s.renderJob(w, r, "joblive") }

// renderJob renders the job named in the path with template name (404
// with the same page when no such job is known).
func (s *Server) renderJob(w http.ResponseWriter, r *http.Request, name string) {
	v, found := s.job(r.Context(), r.PathValue("id"))
	status := http.StatusOK
	if !found {
		status = http.StatusNotFound
	}
	s.render(w, status, name, pageOf(v, s.cfg.Window))
}

func (s *Server) apiJobs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.jobs(r.Context()))
}

func (s *Server) apiJob(w http.ResponseWriter, r *http.Request) {
	v, found := s.job(r.Context(), r.PathValue("id"))
	if !found {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "job " + v.ID + " not found"})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) apiReconfigs(w http.ResponseWriter, r *http.Request) {
	v, found := s.job(r.Context(), r.PathValue("id"))
	if !found {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "job " + v.ID + " not found"})
		return
	}
	writeJSON(w, http.StatusOK, v.Timeline)
}

// render executes template name into a buffer first, so that a failure
// is a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		s.cfg.Log.Error("render", "template", name, "err", err)
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
