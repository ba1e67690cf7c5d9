// The subset of android.hardware.neuralnetworks (AIDL) that npuemu serves, in AOSP's names
// and field order. Differences from AOSP are listed in README.md ("Where npuemu differs").
package android.hardware.neuralnetworks;

@VintfStability
@Backing(type="int")
enum OperandLifeTime {
    TEMPORARY_VARIABLE = 0,
    SUBGRAPH_INPUT = 1,
    SUBGRAPH_OUTPUT = 2,
    CONSTANT_COPY = 3,
    CONSTANT_POOL = 4,
    NO_VALUE = 5,
}
