//! `[server] metrics = "ADDR"`: Prometheus metrics at `/metrics` (OpenMetrics text, see
//! the `telemetry` crate for the names) and a health check at `/healthz`: `200 ok`, or `503`
//! and one line, the most important reason the node has (`health::Health`): `starting` until
//! every mail listener is bound and the engines are open, `stopping` once the server has begun
//! to stop (so a load balancer takes the node out first), and any part's problem, such as
//! `web listener not bound: ...`.
//!
//! It is for the operator's scraper: bind it to loopback or a private network. Requests are
//! tiny and answered from counters; a scrape takes no lock an SMTP session holds.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use health::Health;
use telemetry::Telemetry;

#[derive(Clone)]
struct Endpoints {
    telemetry: Arc<Telemetry>,
    health: Arc<Health>,
}

/// Serves `/metrics` and `/healthz` on `listener` until the task running it is aborted.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    telemetry: Arc<Telemetry>,
    health: Arc<Health>,
) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(Endpoints { telemetry, health });
    if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!(event = "metrics_error", error = %e);
    }
}

async fn metrics(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        endpoints.telemetry.encode(),
    )
}

async fn healthz(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    match endpoints.health.first_problem() {
        None => (StatusCode::OK, "ok\n".to_string()),
        Some((_, reason)) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
    }
}
