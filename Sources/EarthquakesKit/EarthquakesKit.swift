public enum EarthquakesKit {}
