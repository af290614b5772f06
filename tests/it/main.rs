//! The one integration-test binary: every test here runs against a real
//! nats-server (started by `support`) and, where it can, the real `crewlet`
//! executable.

mod support;

mod alerting;
mod archive;
mod archive_format;
mod capacity;
mod carried;
mod cloud;
mod cluster;
mod connect;
mod dashboard;
mod erase;
mod examples;
mod faults;
mod first_run;
mod gates;
mod http;
mod init;
mod invariant;
mod memory;
mod model;
mod node;
mod operator;
mod packaging;
mod pins;
mod replica_model;
mod replicas;
mod run;
mod safety;
mod samples;
mod schemas;
mod security;
mod status;
mod tidy;
mod trim;
mod validate;
mod versions;
mod views;
