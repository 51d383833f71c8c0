//! Black-box tests of the whole server: each test spawns Parley on port 0 with a fresh database
//! (SQLite by default, PostgreSQL when `PARLEY_TEST_DATABASE_URL` is set) and speaks HTTP to it.

// Test helpers are shared between modules of this one test crate; `pub` is the natural marker.
#![allow(unreachable_pub)]

mod api_keys;
mod assistants;
mod auth;
mod caches;
mod channels;
mod chat;
mod cli;
mod cluster;
mod console;
mod console_browser;
mod contract;
mod conversations;
mod demo;
mod docs;
mod durability;
mod errors;
mod event_webhooks;
mod flows;
mod handoff;
mod hardening;
mod health;
mod helpers;
mod idempotency;
mod identities;
mod isolation;
mod mail;
mod mcp;
mod media;
mod media_out;
mod media_s3;
mod media_templates;
mod memory;
mod metrics;
mod operator;
mod operators;
mod races;
mod scheduled_tasks;
mod stages;
mod templates;
mod timeouts;
mod usage;
mod whatsapp;
mod workers;
mod workspaces;
