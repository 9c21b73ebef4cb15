/* h5type.c — HDF5 type id <-> descriptor (see h5type.h). Only the types
 * every HDF5 and netCDF-4 reader understands are accepted: 1/2/4/8-byte
 * integers and IEEE binary32/binary64, either byte order. */
#include "h5log/h5type.h"

int h5l_type_from_hid(hid_t t, h5l_type_t *out)
{
    h5l_type_t d = {0, 0, 0, 0};
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    H5T_order_t ord = H5Tget_order(t);
    if (ord != H5T_ORDER_LE && ord != H5T_ORDER_BE) return H5L_ETYPE;
    d.order = ord == H5T_ORDER_BE;
    d.size = (uint8_t)size;
    if (cls == H5T_INTEGER) {
        if (size != 1 && size != 2 && size != 4 && size != 8) return H5L_ETYPE;
        d.cls = H5L_CLASS_INT;
        d.sign = H5Tget_sign(t) == H5T_SGN_2;
    } else if (cls == H5T_FLOAT) {
        hid_t ieee = size == 4   ? (d.order ? H5T_IEEE_F32BE : H5T_IEEE_F32LE)
                     : size == 8 ? (d.order ? H5T_IEEE_F64BE : H5T_IEEE_F64LE)
                                 : -1;
        if (ieee < 0 || H5Tequal(t, ieee) <= 0) return H5L_ETYPE;
        d.cls = H5L_CLASS_FLOAT;
    } else {
        return H5L_ETYPE;
    }
    *out = d;
    return H5L_OK;
}

hid_t h5l_type_to_hid(h5l_type_t t, size_t n)
{
    hid_t base;
    switch (t.cls) {
    case H5L_CLASS_INT:
        switch (t.size) {
        case 1:
            base = t.sign ? (t.order ? H5T_STD_I8BE : H5T_STD_I8LE) : (t.order ? H5T_STD_U8BE : H5T_STD_U8LE);
            break;
        case 2:
            base = t.sign ? (t.order ? H5T_STD_I16BE : H5T_STD_I16LE) : (t.order ? H5T_STD_U16BE : H5T_STD_U16LE);
            break;
        case 4:
            base = t.sign ? (t.order ? H5T_STD_I32BE : H5T_STD_I32LE) : (t.order ? H5T_STD_U32BE : H5T_STD_U32LE);
            break;
        case 8:
            base = t.sign ? (t.order ? H5T_STD_I64BE : H5T_STD_I64LE) : (t.order ? H5T_STD_U64BE : H5T_STD_U64LE);
            break;
        default:
            return -1;
        }
        return H5Tcopy(base);
    case H5L_CLASS_FLOAT:
        if (t.size == 4) return H5Tcopy(t.order ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
        if (t.size == 8) return H5Tcopy(t.order ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
        return -1;
    case H5L_CLASS_STRING: {
        hid_t s = H5Tcopy(H5T_C_S1);
        if (s < 0) return -1;
        if (H5Tset_size(s, n ? n : 1) < 0 || H5Tset_strpad(s, H5T_STR_NULLTERM) < 0) {
            H5Tclose(s);
            return -1;
        }
        return s;
    }
    default:
        return -1;
    }
}
