//! `[server] metrics = "ADDR"`: Prometheus metrics at `/metrics` (OpenMetrics text, see
//! the `telemetry` crate for the names) and a health check at `/healthz`: `200 ok` once every
//! listener is bound and the engines are open, `503 starting` before and `503 stopping`
//! once the server has begun to stop, so a load balancer takes the node out first.
//!
//! It is for the operator's scraper: bind it to loopback or a private network. Requests are
//! tiny and answered from counters; a scrape takes no lock an SMTP session holds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use anyhow::{Context as _, Result};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use telemetry::Telemetry;

/// Where the server is in its life, and whether it can take mail, as `/healthz` reports it.
#[derive(Default)]
pub struct Health {
    phase: AtomicU8,
    /// Asked at every `/healthz` once ready: why the node cannot take mail now (its disk is
    /// below the free-space reserve, an engine stopped), if it cannot.
    probe: std::sync::OnceLock<Probe>,
}

/// See [`Health::watch`].
type Probe = Box<dyn Fn() -> Option<String> + Send + Sync>;

const STARTING: u8 = 0;
const READY: u8 = 1;
const STOPPING: u8 = 2;

impl Health {
    pub fn ready(&self) {
        self.phase.store(READY, Ordering::Release);
    }

    pub fn stopping(&self) {
        self.phase.store(STOPPING, Ordering::Release);
    }

    /// Sets what a ready node is asked at every `/healthz`: a reason it cannot take mail, or
    /// `None`. Cheap calls only (it runs on the metrics listener's task). Set once.
    pub fn watch(&self, probe: impl Fn() -> Option<String> + Send + Sync + 'static) {
        let _ = self.probe.set(Box::new(probe));
    }

    /// `200 ok`, or `503` and one line naming the reason.
    fn answer(&self) -> (StatusCode, String) {
        let unavailable = |why: &str| (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"));
        match self.phase.load(Ordering::Acquire) {
            READY => match self.probe.get().and_then(|probe| probe()) {
                None => (StatusCode::OK, "ok\n".to_string()),
                Some(why) => unavailable(&why.replace(['\r', '\n'], " ")),
            },
            STARTING => unavailable("starting"),
            _ => unavailable("stopping"),
        }
    }
}

#[derive(Clone)]
struct Endpoints {
    telemetry: Arc<Telemetry>,
    health: Arc<Health>,
}

/// Binds `address` (failing the start when it cannot) and serves until the task is aborted.
pub(crate) async fn start(
    address: SocketAddr,
    telemetry: Arc<Telemetry>,
    health: Arc<Health>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("metrics: cannot listen on {address}"))?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(Endpoints { telemetry, health });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(event = "metrics_error", error = %e);
        }
    });
    Ok((bound, task))
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
    endpoints.health.answer()
}
