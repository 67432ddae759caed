// Package grafana holds the example Grafana dashboard of the exo daemon's
// Prometheus metrics, exo-dashboard.json (import it, pick the Prometheus
// data source, the rack's job and its hosts). Its test checks that every
// PromQL expression of the dashboard uses only metric names that the
// daemon registers (parsed out of daemon/*.go), so the dashboard cannot
// drift from the metric set; docs/metrics.md documents that set.
package grafana
