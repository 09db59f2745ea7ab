print("earthquakes: not yet built")
