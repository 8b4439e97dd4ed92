//! End-to-end scenarios over HTTP, one module per area, in one test binary so the stack is
//! linked once. Each test is isolated: its own database (or schema), cache prefix, queue
//! names and simulator.

mod ai;
mod analyze;
mod bad_input;
mod batch;
mod browser;
mod creators;
mod events;
mod faults;
mod foundation;
mod hardening;
mod http;
mod instagram;
mod library;
mod media;
mod money;
mod notifications;
mod openapi;
mod pace;
mod races;
mod runtime;
mod sandbox;
mod search;
mod snapshots;
mod spikes;
mod workspace;
