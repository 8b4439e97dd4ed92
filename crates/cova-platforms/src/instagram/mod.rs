//! Instagram Reels (in progress): URL forms and shortcodes, and the reading of Instagram's
//! answers and walls. The reader over HTTP, the simulator's Instagram and the wiring into
//! `Platform` come next.

pub mod parse;
pub mod shortcode;
pub mod urls;
