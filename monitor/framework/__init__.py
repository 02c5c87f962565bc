"""The V3 risk framework (versioned taxonomy as data), grading schemes and the composite."""
