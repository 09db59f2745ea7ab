public enum BatonTesting {}
