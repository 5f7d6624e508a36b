//! firstbad: automated bisection of Linux kernel performance regressions.
