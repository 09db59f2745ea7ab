// Placeholder; filled in by the networking work (issue 6).
public enum BatonNetworking {}
